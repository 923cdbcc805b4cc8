package ledger

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pisess/writers/durable"
)

// TestMendPisess: an object of .pisess/ of the wrong type stops every run
// (CheckPisessObjects, OpenJournal: a *WrongTypeError naming it and the
// command that moves it by hand); MendPisess moves it — the entry itself,
// never a link's target — into the quarantine of the run, after which the
// checks pass, and a move that fails is reported with that command and
// nothing else is done (issue 32 §3).
func TestMendPisess(t *testing.T) {
	const cid = "mend-run-0001"
	type damage struct {
		name, object string
		make         func(t *testing.T, p string)
	}
	dir := func(t *testing.T, p string) {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	fifo := func(t *testing.T, p string) {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := func(t *testing.T, p string) {
		if err := os.WriteFile(p, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var outside string
	link := func(t *testing.T, p string) {
		if err := os.Symlink(outside, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []damage{
		{"journal a directory", JournalName, dir}, {"journal a FIFO", JournalName, fifo}, {"journal a symlink", JournalName, link},
		{"lock a directory", "lock", dir}, {"lock a FIFO", "lock", fifo}, {"lock a symlink", "lock", link},
		{".pisess a file", "", file}, {".pisess a symlink", "", link},
	} {
		t.Run(d.name, func(t *testing.T) {
			tree := t.TempDir()
			outside = filepath.Join(t.TempDir(), "target")
			if err := os.WriteFile(outside, []byte("not the tree's\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			obj := filepath.Join(tree, PisessDir)
			if d.object != "" {
				if err := os.Mkdir(obj, 0o700); err != nil {
					t.Fatal(err)
				}
				obj = filepath.Join(obj, d.object)
			}
			d.make(t, obj)
			var wt *WrongTypeError
			if err := CheckPisessObjects(tree); !errors.As(err, &wt) || wt.Path != obj || !strings.Contains(err.Error(), "mv -- "+obj) {
				t.Fatalf("CheckPisessObjects: %v, want a *WrongTypeError naming %s and the command that moves it", err, obj)
			}
			if d.object != "lock" {
				if _, err := OpenJournal(tree); !errors.As(err, &wt) {
					t.Errorf("OpenJournal: %v, want the *WrongTypeError at once, not at the first append", err)
				}
			}
			mended := MendPisess(durable.OS, tree, cid)
			if len(mended) != 1 || mended[0].Err != nil || mended[0].Path != obj {
				t.Fatalf("MendPisess: %+v", mended)
			}
			to := mended[0].To
			if !strings.HasPrefix(to, Quarantine(tree, cid)+string(filepath.Separator)) {
				t.Errorf("moved to %s, not into the quarantine of %s", to, cid)
			}
			if _, err := os.Lstat(to); err != nil {
				t.Errorf("nothing at %s: %v", to, err)
			}
			if err := CheckPisessObjects(tree); err != nil {
				t.Errorf("after the mending: %v", err)
			}
			if b, err := os.ReadFile(outside); err != nil || string(b) != "not the tree's\n" {
				t.Errorf("the link's target changed: %q %v", b, err)
			}
			j, err := OpenJournal(tree)
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Append(NoteRecord(Note{CorrelationID: cid, At: "2026-01-01T00:00:00.000Z", Session: tree, Kind: NoteRepair, Path: obj,
				Detail: "moved aside"})); err != nil {
				t.Errorf("the new journal: %v", err)
			}
		})
	}
	t.Run("a move that fails", func(t *testing.T) {
		tree := t.TempDir()
		obj := filepath.Join(tree, PisessDir, JournalName)
		if err := os.MkdirAll(obj, 0o700); err != nil {
			t.Fatal(err)
		}
		ops := durable.FaultyOps(durable.FaultRule{Op: durable.FaultRename, Pattern: JournalName, Err: syscall.EACCES})
		mended := MendPisess(ops, tree, cid)
		if len(mended) != 1 || mended[0].Err == nil || mended[0].To != "" || !strings.HasPrefix(mended[0].Hand(), "mv -- "+obj+" ") {
			t.Fatalf("MendPisess: %+v, want the failure and the command by hand", mended)
		}
		if fi, err := os.Lstat(obj); err != nil || !fi.IsDir() {
			t.Errorf("the object moved anyway: %v", err)
		}
	})
}
