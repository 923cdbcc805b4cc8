package discover

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pisess/readers"
)

// unreadableWalker is the uid the child walk of TestWalkUnreadableSessions
// runs as: no account has it, and it is not the files' owner.
const unreadableWalker = 54322

// envWalkChild makes the test binary walk the tree it names and print the
// result as JSON (TestWalkUnreadableSessions's child).
const envWalkChild = "PISESS_DISCOVER_WALK_CHILD"

// TestWalkUnreadableSessions: a session file the walker cannot read
// (mode 000, read by a user who is not root) is a session this run could
// not read (ReadError, of a transient class), for a .sqlite as for a
// .jsonl: never "skipped, not a SQLite database" (issue 32 §3), never a
// refusal. Root ignores modes, so the walk runs in a child as another uid.
// walkedSession is what the child of TestWalkUnreadableSessions reports
// of each session (a RefusedError's Err does not survive JSON).
type walkedSession struct {
	Name             string
	Refused          string
	ReadErrClass     readers.Class
	ReadErrTransient bool
	ReadErrReason    string
}

type walked struct {
	Sessions []walkedSession
	Skipped  []Skipped
}

func TestWalkUnreadableSessions(t *testing.T) {
	if root := os.Getenv(envWalkChild); root != "" {
		trees, err := Walk([]string{root})
		if err != nil || len(trees) != 1 {
			t.Fatalf("walk: %v (%d trees)", err, len(trees))
		}
		var w walked
		for _, s := range trees[0].Sessions {
			ws := walkedSession{Name: filepath.Base(s.Path)}
			if s.Refusal != nil {
				ws.Refused = s.Refusal.Error()
			}
			if r := s.ReadError; r != nil {
				ws.ReadErrClass, ws.ReadErrTransient, ws.ReadErrReason = r.Class, r.Transient(), r.Reason
			}
			w.Sessions = append(w.Sessions, ws)
		}
		w.Skipped = trees[0].Skipped
		b, _ := json.Marshal(w)
		os.Stdout.Write(append([]byte("\nWALKED "), append(b, '\n')...))
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the walk runs as another uid")
	}
	base := t.TempDir()
	for d := base; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(base, "--p--")
	write(t, filepath.Join(dir, "s.jsonl"), header+entry)
	write(t, filepath.Join(dir, "d.sqlite"), "SQLite format 3\x00 and more")
	write(t, filepath.Join(dir, "n.sqlite"), "not a database at all\n")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for n, mode := range map[string]os.FileMode{"s.jsonl": 0, "d.sqlite": 0, "n.sqlite": 0o644} {
		if err := os.Chmod(filepath.Join(dir, n), mode); err != nil {
			t.Fatal(err)
		}
	}
	// The test binary's own directory is root's 0700: the child runs a copy.
	bin := filepath.Join(t.TempDir(), "discover.test")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(bin); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^TestWalkUnreadableSessions$")
	cmd.Env = append(os.Environ(), envWalkChild+"="+base)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: unreadableWalker, Gid: unreadableWalker}}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	_, line, found := bytes.Cut(out, []byte("\nWALKED "))
	var w walked
	if err != nil || !found || json.Unmarshal(bytes.SplitN(line, []byte("\n"), 2)[0], &w) != nil {
		t.Fatalf("child walk: %v\n%s", err, out)
	}
	got := map[string]walkedSession{}
	for _, s := range w.Sessions {
		got[s.Name] = s
	}
	for _, n := range []string{"s.jsonl", "d.sqlite"} {
		s, ok := got[n]
		if !ok {
			t.Errorf("%s is not listed as a session (skipped: %+v)", n, w.Skipped)
			continue
		}
		if s.Refused != "" {
			t.Errorf("%s is refused (%s): an unreadable file is no verdict", n, s.Refused)
		}
		if !s.ReadErrTransient || !strings.Contains(s.ReadErrReason, syscall.EACCES.Error()) {
			t.Errorf("%s: read error %s %q (transient %t), want a transient error saying permission denied",
				n, s.ReadErrClass, s.ReadErrReason, s.ReadErrTransient)
		}
	}
	if _, ok := got["n.sqlite"]; ok {
		t.Errorf("n.sqlite, which the walker can read and which is no database, is listed as a session")
	}
	skipped := false
	for _, sk := range w.Skipped {
		if filepath.Base(sk.Path) == "n.sqlite" && sk.Reason == "not a SQLite database" {
			skipped = true
		}
	}
	if !skipped {
		t.Errorf("n.sqlite is not skipped as not a SQLite database: %+v", w.Skipped)
	}
}
