package upgrade

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/writers/durable"
)

// Environment of the crash child.
const (
	envCrashChild  = "PISESS_UPGRADE_CRASH_TREE"
	envCrashEvents = "PISESS_UPGRADE_CRASH_EVENTS"
)

// TestCrashChild is the child of TestCrash: it upgrades the one session of
// the tree in $PISESS_UPGRADE_CRASH_TREE, recording events as JSON lines.
func TestCrashChild(t *testing.T) {
	tree := os.Getenv(envCrashChild)
	if tree == "" {
		t.Skip("crash child only")
	}
	path := filepath.Join(tree, "--x--", "2025-06-01T00-00-00-000Z_s.jsonl")
	opt := options(t, tree, path, nil)
	opt.Record = func(e Event) error {
		f, err := os.OpenFile(os.Getenv(envCrashEvents), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		b, _ := json.Marshal(e)
		_, err = f.Write(append(b, '\n'))
		return err
	}
	res := run(t, path, opt)
	if res.Status != StatusUpgraded {
		t.Fatalf("%s %+v", res.Status, res.Problem)
	}
}

// TestCrash kills an upgrade at every failpoint (each hit of each) and
// checks that the session is either the original or the upgrade, never
// anything else, that an upgraded file is always journaled with its
// original in the quarantine, and that a re-run converges and a third run
// changes nothing.
func TestCrash(t *testing.T) {
	if !durable.FailpointsEnabled {
		t.Skip("needs -tags failpoints (make crash)")
	}
	_, path0 := sessionTree(t, v1Session)
	dry := run(t, path0, Options{DryRun: true})
	for _, name := range durable.KnownFailpoints() {
		for hit := 1; ; hit++ {
			armed := name + "@" + strconv.Itoa(hit)
			tree, path := sessionTree(t, v1Session)
			events := filepath.Join(t.TempDir(), "events.jsonl")
			killed, _, stderr := fixtures.RunKilled(t, os.Args[0], []string{"-test.run=^TestCrashChild$", "-test.count=1"},
				[]string{envCrashChild + "=" + tree, envCrashEvents + "=" + events, "PISESS_FAILPOINT=" + armed})
			got := readFile(t, path)
			upgraded := sha(got) == dry.NewSHA256
			if !upgraded && string(got) != v1Session {
				t.Fatalf("%s: the session is neither the original nor the upgrade:\n%s", armed, got)
			}
			evs, _ := os.ReadFile(events)
			q := filepath.Join(tree, ".pisess", "quarantine", testCorrelationID, "--x--", filepath.Base(path)+".original")
			if upgraded {
				if !bytes.Contains(evs, []byte(`"Kind":"upgraded"`)) {
					t.Errorf("%s: upgraded without a journal note", armed)
				}
				if string(readFile(t, q)) != v1Session {
					t.Errorf("%s: upgraded without the original in the quarantine", armed)
				}
			}
			// Converge.
			rec := &recorder{}
			res := run(t, path, options(t, tree, path, rec))
			if want := map[bool]Status{false: StatusUpgraded, true: StatusCurrent}[upgraded]; res.Status != want {
				t.Errorf("%s: re-run %s %+v, want %s", armed, res.Status, res.Problem, want)
			}
			if sha(readFile(t, path)) != dry.NewSHA256 || string(readFile(t, q)) != v1Session {
				t.Errorf("%s: re-run did not converge", armed)
			}
			if res := run(t, path, options(t, tree, path, rec)); res.Status != StatusCurrent {
				t.Errorf("%s: third run %s", armed, res.Status)
			}
			for _, dir := range []string{filepath.Dir(path), filepath.Dir(q)} {
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					if strings.HasSuffix(e.Name(), ".tmp") {
						t.Errorf("%s: leftover %s", armed, e.Name())
					}
				}
			}
			if !killed {
				if !upgraded {
					t.Errorf("%s: the child neither died nor upgraded:\n%s", armed, stderr)
				}
				break // this hit was never reached: the next is not either
			}
			t.Logf("%s: killed; session %s", armed, map[bool]string{false: "original", true: "upgraded"}[upgraded])
		}
	}
}
