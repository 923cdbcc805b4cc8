package durable

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"pisess/fixtures"
)

func TestKnownFailpoints(t *testing.T) {
	got := KnownFailpoints()
	for _, want := range []string{fpBeforeSync, fpBeforeRename, fpAfterRename, fpBeforeTrim} {
		found := false
		for _, n := range got {
			found = found || n == want
		}
		if !found {
			t.Errorf("%s not listed in %q", want, got)
		}
	}
	for i := 1; i < len(got); i++ {
		if got[i-1] >= got[i] {
			t.Fatalf("not sorted: %q", got)
		}
	}
}

func TestRegisterPanics(t *testing.T) {
	for _, name := range []string{fpBeforeSync, "durable.during-sync", "Durable.before-x", "before-x", "durable.before-", "durable.after-x-", ".before-x"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			Register(name)
		}()
	}
}

func TestCheckFailpointName(t *testing.T) {
	for _, ok := range []string{"durable.before-rename", "rollback.after-cutover-rename", "writers.store.before-seal", "a1.after-2"} {
		if err := checkFailpointName(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

func TestParseFailpoints(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]int
		bad  bool
	}{
		{"", map[string]int{}, false},
		{"durable.before-rename", map[string]int{"durable.before-rename": 1}, false},
		{" durable.before-rename@3 , durable.after-rename ,", map[string]int{"durable.before-rename": 3, "durable.after-rename": 1}, false},
		{"durable.before-rename@0", nil, true},
		{"durable.before-rename@x", nil, true},
		{"nonsense", nil, true},
	}
	for _, tt := range tests {
		got, err := parseFailpoints(tt.in)
		if (err != nil) != tt.bad || !tt.bad && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseFailpoints(%q) = %v, %v", tt.in, got, err)
		}
	}
}

// crashChild returns a test binary of this package built with
// -tags failpoints: this one when it was, else one built for the purpose.
func crashChild(t *testing.T) string {
	t.Helper()
	if FailpointsEnabled {
		return os.Args[0]
	}
	if testing.Short() {
		t.Skip("builds a failpoints test binary")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the failpoints binary")
	}
	return fixtures.BuildTestBinary(t, "pisess/writers/durable", "failpoints")
}

// TestCrash kills a child at each failpoint of this package and checks
// that what it leaves is the old state or the new one, and that the next
// write converges. Every registered durable.* failpoint must have a case.
func TestCrash(t *testing.T) {
	bin := crashChild(t)
	type state struct{ final, temp string } // "" = absent
	tests := []struct {
		name   string
		env    string // PISESS_FAILPOINT or PISESS_KILL_AFTER_BYTES=…
		helper string
		write  []string // names written by atomic-write
		want   state
	}{
		{"before-sync", fpBeforeSync, "atomic-write", []string{"f"}, state{"old", "new content"}},
		{"before-rename", fpBeforeRename, "atomic-write", []string{"f"}, state{"old", "new content"}},
		{"after-rename", fpAfterRename, "atomic-write", []string{"f"}, state{"new content", ""}},
		{"second rename", fpBeforeRename + "@2", "atomic-write", []string{"g", "f"}, state{"old", "new content"}},
		{"before-trim", fpBeforeTrim, "in-place", nil, state{"new content", ""}},
		{"before-trim of a longer file", fpBeforeTrim, "in-place-longer", nil, state{"new content is longer", ""}},
		{"in-place before-sync", fpBeforeSync, "in-place", nil, state{"new content", ""}},
		{"append before-sync", fpBeforeSync, "append", nil, state{"old" + "new content\n", ""}},
		{"kill after 5 bytes", "PISESS_KILL_AFTER_BYTES=5", "atomic-write", []string{"f"}, state{"old", "new c"}},
		{"kill after 5 bytes in place", "PISESS_KILL_AFTER_BYTES=5", "in-place", nil, state{"new c", ""}},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[strings.Split(tt.env, "@")[0]] = true
		t.Run(tt.name, func(t *testing.T) {
			dir, tmpDir := store(t)
			final := filepath.Join(dir, "f")
			writeFile(t, final, "old")
			if tt.helper == "in-place-longer" {
				// The old content's end stays until it is cut.
				writeFile(t, final, "old content is longer")
				tt.helper = "in-place"
			}
			var args []string
			switch tt.helper {
			case "atomic-write":
				args = append([]string{dir, tmpDir, "new content"}, tt.write...)
			case "in-place":
				args = []string{final, "new content"}
			case "append":
				args = []string{final, "new content"}
			}
			env := []string{helperEnv + "=" + tt.helper}
			if strings.Contains(tt.env, "=") {
				env = append(env, tt.env)
			} else {
				env = append(env, "PISESS_FAILPOINT="+tt.env)
			}
			killed, _, stderr := fixtures.RunKilled(t, bin, args, env)
			if !killed {
				t.Fatalf("child not killed\nstderr: %s", stderr)
			}
			got := state{readFile(t, final), ""}
			if tmp := filepath.Join(tmpDir, "f.tmp"); exists(t, tmp) {
				got.temp = readFile(t, tmp)
			}
			if got != tt.want {
				t.Fatalf("after the crash %+v, want %+v", got, tt.want)
			}
			if tt.helper == "atomic-write" {
				// The next write converges: the leftover is ours, removed.
				if err := OS.WriteFileAtomic(dir, tmpDir, "f", []byte("again"), 0o600); err != nil {
					t.Fatal(err)
				}
				if readFile(t, final) != "again" || exists(t, filepath.Join(tmpDir, "f.tmp")) {
					t.Fatal("re-run did not converge")
				}
			}
		})
	}
	for _, name := range KnownFailpoints() {
		if strings.HasPrefix(name, "durable.") && !covered[name] {
			t.Errorf("failpoint %s has no crash case", name)
		}
	}
}

// A failpoint name the binary does not know is a harness error, not a
// silent pass.
func TestCrashUnknownFailpoint(t *testing.T) {
	bin := crashChild(t)
	dir, tmpDir := store(t)
	killed, _, stderr := fixtures.RunKilled(t, bin, []string{dir, tmpDir, "x", "f"},
		[]string{helperEnv + "=atomic-write", "PISESS_FAILPOINT=durable.before-nothing"})
	if killed || !strings.Contains(stderr, "unknown failpoint") {
		t.Fatalf("killed=%v stderr=%s", killed, stderr)
	}
}
