package commands

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"pisess/ledger"
)

// TestMain lets the test binary stand in for pisess when a root run
// re-executes itself as a tree's owner (owner.go): the child is this
// binary with pisess's arguments.
func TestMain(m *testing.M) {
	if os.Getenv(envOwnerChild) != "" || os.Getenv(envTestMain) != "" {
		// As main.go does: a signal cancels the run.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, os.Args, os.Stdout, os.Stderr)
		stop()
		Exit(code)
	}
	// A run as root logs to /var/log/pisess by default: the tests' runs
	// log to a directory of their own, whose log every uid a test runs
	// pisess as may append to.
	if os.Getenv(EnvLogDir) == "" {
		dir, err := os.MkdirTemp("", "pisess-test-log-")
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, defaultLogName), nil, 0o666)
		}
		if err == nil {
			err = os.Chmod(filepath.Join(dir, defaultLogName), 0o666)
		}
		if err == nil {
			err = os.Chmod(dir, 0o777)
		}
		if err != nil {
			panic(err)
		}
		os.Setenv(EnvLogDir, dir)
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// envTestMain makes the test binary run pisess itself, as a child that
// tests can signal.
const envTestMain = "PISESS_TEST_AS_MAIN"

// hostileUID owns the hostile trees when the tests run as root: an uid no
// account has, as a tree's owner on a shared machine may be anyone.
const hostileUID = 54321

const legacySession = `{"type":"session","version":2,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}
{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}
`

// hostileTree is a session tree its owner has tampered with, beside a
// decoy directory that belongs to root and that no command may change.
type hostileTree struct {
	base, tree, decoy string
	session           string // tree/--a--/s.jsonl, upgraded by run realUpgrade
	migrated          string // tree/--p--/m.jsonl, migrated by run realMigrate
}

const (
	realUpgrade = "real-upg-0001"
	realMigrate = "real-mig-0001"
	forgedRun   = "forged-run-0001"
)

func newHostileTree(t *testing.T) *hostileTree {
	t.Helper()
	base := t.TempDir()
	// The owner's child must reach the tree: t.TempDir's parents are 0700.
	for d := base; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h := &hostileTree{base: base, tree: filepath.Join(base, "tree"), decoy: filepath.Join(base, "decoy")}
	h.session = filepath.Join(h.tree, "--a--", "s.jsonl")
	h.migrated = filepath.Join(h.tree, "--p--", "m.jsonl")
	for _, d := range []string{filepath.Dir(h.session), filepath.Dir(h.migrated), filepath.Join(h.decoy, "dir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, data string, mode os.FileMode) {
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(h.session, legacySession, 0o600)
	example, err := os.ReadFile(exampleSession)
	if err != nil {
		t.Fatal(err)
	}
	write(h.migrated, string(example), 0o600)
	write(filepath.Join(h.decoy, "config.jsonl"), "root-owned config: do not touch\n", 0o644)
	write(filepath.Join(h.decoy, "dir", "data.jsonl"), legacySession, 0o600)
	h.giveAway(t)
	if r := pisess(t, "upgrade", "--correlation-id", realUpgrade, h.session); r.code != 0 {
		t.Fatalf("setup upgrade: %s", r)
	}
	if r := pisess(t, "migrate", "--correlation-id", realMigrate, filepath.Join(h.tree, "--p--")); r.code != 0 {
		t.Fatalf("setup migrate: %s", r)
	}
	return h
}

// giveAway hands the tree to hostileUID (when root): from here on, its
// owner may write anything in it.
func (h *hostileTree) giveAway(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	err := filepath.WalkDir(h.tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() && st.Sys().(*syscall.Stat_t).Nlink > 1 {
			return nil // a planted link to a root file stays root's
		}
		return os.Lchown(p, hostileUID, hostileUID)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot describes everything under base but the tree: path, type, mode,
// owner, size, content digest or link target.
func (h *hostileTree) snapshot(t *testing.T) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(h.base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == h.tree || strings.HasPrefix(p, h.tree+string(filepath.Separator)) {
			if p == h.tree {
				return nil
			}
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		what := ""
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			what, _ = os.Readlink(p)
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			what = hex.EncodeToString(sum[:])
		}
		lines = append(lines, fmt.Sprintf("%s %v %d:%d %d %d %s", p, fi.Mode(), st.Uid, st.Gid, fi.Size(), st.Nlink, what))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func sha256File(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// appendJournal appends raw lines to the tree's journal, as its owner can.
func (h *hostileTree) appendJournal(t *testing.T, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(ledger.JournalPath(h.tree), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.WriteString(strings.TrimSuffix(l, "\n") + "\n"); err != nil {
			t.Fatal(err)
		}
	}
}

func (h *hostileTree) note(t *testing.T, n ledger.Note) string {
	t.Helper()
	if n.CorrelationID == "" {
		n.CorrelationID = forgedRun
	}
	n.At = "2025-01-01T00:00:00.000Z"
	return string(ledger.AppendNote(nil, n))
}

// hostileCase is one way a tree's owner tampers with the tree.
type hostileCase struct {
	name string
	// tamper changes the tree (as its owner could) and returns the
	// correlation id a rollback should be asked for.
	tamper func(t *testing.T, h *hostileTree) string
	// forged is set when the tamper is a journal record that fsck must
	// report.
	forged bool
	// during runs beside each command (a racing attacker); nil for none.
	during func(h *hostileTree, stop <-chan struct{})
}

func hostileCases() []hostileCase {
	outsideUpgrade := func(t *testing.T, h *hostileTree, session, quarantine string) string {
		evil := filepath.Join(h.tree, "evil")
		if err := os.WriteFile(evil, []byte("attacker content\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		h.appendJournal(t, h.note(t, ledger.Note{Kind: ledger.NoteUpgraded, Session: session, Path: session,
			QuarantinePath: quarantine, SHA256: sha256File(t, evil),
			NewSHA256: sha256File(t, filepath.Join(h.decoy, "config.jsonl"))}))
		return forgedRun
	}
	return []hostileCase{
		{name: "upgraded note naming a file outside, correct digests", forged: true, tamper: func(t *testing.T, h *hostileTree) string {
			target := filepath.Join(h.decoy, "config.jsonl")
			return outsideUpgrade(t, h, target, filepath.Join(h.tree, "evil"))
		}},
		{name: "relative path climbing out with ..", forged: true, tamper: func(t *testing.T, h *hostileTree) string {
			return outsideUpgrade(t, h, "--a--/../../decoy/config.jsonl", ".pisess/quarantine/"+forgedRun+"/evil")
		}},
		{name: "installed note naming a directory outside by dev/ino", forged: true, tamper: func(t *testing.T, h *hostileTree) string {
			dir := filepath.Join(h.decoy, "dir")
			st, err := os.Lstat(dir)
			if err != nil {
				t.Fatal(err)
			}
			s := st.Sys().(*syscall.Stat_t)
			h.appendJournal(t, h.note(t, ledger.Note{Kind: ledger.NoteInstalled, Session: filepath.Join(h.decoy, "dir.jsonl"),
				Path: dir, Detail: fmt.Sprintf("installed (dev=%d ino=%d)", s.Dev, s.Ino)}))
			return forgedRun
		}},
		{name: "note into the tree naming a sidecar that is not the session's", forged: false, tamper: func(t *testing.T, h *hostileTree) string {
			// Inside the tree but inconsistent: refused by rollback.
			h.appendJournal(t, h.note(t, ledger.Note{Kind: ledger.NoteInstalled, Session: "--p--/m.jsonl", Path: "--a--"}))
			return forgedRun
		}},
		{name: "symlinked directory inside the tree pointing out", forged: true, tamper: func(t *testing.T, h *hostileTree) string {
			link := filepath.Join(h.tree, "--evil--")
			if err := os.Symlink(h.decoy, link); err != nil {
				t.Fatal(err)
			}
			// A record through it, with the decoy's digests.
			return outsideUpgrade(t, h, "--evil--/config.jsonl", ".pisess/quarantine/"+forgedRun+"/--evil--/config.jsonl.pre-upgrade")
		}},
		{name: "session file that is a symlink to a file outside", tamper: func(t *testing.T, h *hostileTree) string {
			if err := os.Symlink(filepath.Join(h.decoy, "dir", "data.jsonl"), filepath.Join(h.tree, "--a--", "l.jsonl")); err != nil {
				t.Fatal(err)
			}
			return realUpgrade
		}},
		{name: "quarantined original swapped for a symlink out", tamper: func(t *testing.T, h *hostileTree) string {
			q := ledger.QuarantinePath(h.tree, realUpgrade, "--a--/s.jsonl", "pre-upgrade")
			if err := os.Remove(q); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(h.decoy, "config.jsonl"), q); err != nil {
				t.Fatal(err)
			}
			return realUpgrade
		}},
		{name: "quarantined original hard-linked to a root file", tamper: func(t *testing.T, h *hostileTree) string {
			q := ledger.QuarantinePath(h.tree, realUpgrade, "--a--/s.jsonl", "pre-upgrade")
			orig, err := os.ReadFile(q)
			if err != nil {
				t.Fatal(err)
			}
			// The decoy's bytes become the original's, so digests match.
			victim := filepath.Join(h.decoy, "dir", "data.jsonl")
			if err := os.WriteFile(victim, orig, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(q); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(victim, q); err != nil {
				t.Skipf("hard link: %v", err)
			}
			return realUpgrade
		}},
		{name: "sidecar file hard-linked to a root file with a loose mode", tamper: func(t *testing.T, h *hostileTree) string {
			idx := filepath.Join(strings.TrimSuffix(h.migrated, ".jsonl")+".v2", "index", "offsets.jsonl")
			victim := filepath.Join(h.decoy, "index-copy")
			b, err := os.ReadFile(idx)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(victim, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(idx); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(victim, idx); err != nil {
				t.Skipf("hard link: %v", err)
			}
			return realMigrate
		}},
		{name: "session hard-linked to a root file", tamper: func(t *testing.T, h *hostileTree) string {
			if err := os.Link(filepath.Join(h.decoy, "config.jsonl"), filepath.Join(h.tree, "--p--", "h.jsonl")); err != nil {
				t.Skipf("hard link: %v", err)
			}
			return realMigrate
		}},
		{name: ".pisess is a symlink to a directory outside", tamper: func(t *testing.T, h *hostileTree) string {
			p := filepath.Join(h.tree, ledger.PisessDir)
			if err := os.Rename(p, filepath.Join(h.tree, "old-pisess")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(h.decoy, p); err != nil {
				t.Fatal(err)
			}
			return realUpgrade
		}},
		{name: "quarantine directory is a symlink to a directory outside", tamper: func(t *testing.T, h *hostileTree) string {
			q := filepath.Join(h.tree, ledger.PisessDir, ledger.QuarantineDir)
			if err := os.Rename(q, q+".old"); err != nil {
				t.Fatal(err)
			}
			// A run directory by a real run's name, as prune looks for.
			if err := os.MkdirAll(filepath.Join(h.decoy, realUpgrade), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(h.decoy, realUpgrade, "precious"), []byte("root's"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(h.decoy, q); err != nil {
				t.Fatal(err)
			}
			return realUpgrade
		}},
		{name: "stale session with the quarantine symlinked out (refresh, discard)", tamper: func(t *testing.T, h *hostileTree) string {
			f, err := os.OpenFile(h.migrated, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(`{"type":"session_info","id":"zz000001","parentId":"e1f2a3b4","timestamp":"2026-01-05T11:00:00.000Z","name":"later"}` + "\n")
			f.Close()
			q := filepath.Join(h.tree, ledger.PisessDir, ledger.QuarantineDir)
			if err := os.Rename(q, q+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(h.decoy, q); err != nil {
				t.Fatal(err)
			}
			return realMigrate
		}},
		{name: "oversized and garbage journal lines", forged: true, tamper: func(t *testing.T, h *hostileTree) string {
			h.appendJournal(t, strings.Repeat("A", ledger.MaxJournalLine+1), "\x00\xff garbage", `{"schema":"pisess.journal_note.v1"}`)
			return realUpgrade
		}},
		{name: "directory swapped for a symlink while commands run", tamper: func(t *testing.T, h *hostileTree) string {
			return realUpgrade
		}, during: func(h *hostileTree, stop <-chan struct{}) {
			dir := filepath.Dir(h.session)
			aside := dir + ".aside"
			for {
				select {
				case <-stop:
					os.Remove(dir)
					os.Rename(aside, dir)
					return
				default:
				}
				if os.Rename(dir, aside) == nil {
					os.Symlink(h.decoy, dir)
					time.Sleep(50 * time.Microsecond)
					os.Remove(dir)
					os.Rename(aside, dir)
				}
			}
		}},
	}
}

// TestHostileTrees runs every command that changes a tree over trees their
// owner has tampered with, as root over another uid's tree when the tests
// run as root: nothing outside the tree changes (contents, modes, owners),
// nothing is created outside it, and every forged record is reported.
func TestHostileTrees(t *testing.T) {
	type command struct {
		name string
		args func(h *hostileTree, cid string) []string
	}
	commands := []command{
		{"rollback", func(h *hostileTree, cid string) []string { return []string{"rollback", "--tree", h.tree, cid} }},
		{"fsck --repair", func(h *hostileTree, _ string) []string { return []string{"fsck", "--repair", h.tree} }},
		{"migrate", func(h *hostileTree, _ string) []string { return []string{"migrate", h.tree} }},
		{"upgrade", func(h *hostileTree, _ string) []string { return []string{"upgrade", h.tree} }},
		{"prune", func(h *hostileTree, _ string) []string { return []string{"prune", "--keep-within", "0s", h.tree} }},
	}
	for _, c := range hostileCases() {
		t.Run(c.name, func(t *testing.T) {
			h := newHostileTree(t)
			cid := c.tamper(t, h)
			h.giveAway(t)
			before := h.snapshot(t)
			if c.forged {
				r := pisess(t, "fsck", h.tree)
				if r.code != 4 || !strings.Contains(r.stdout+r.stderr, "tree.journal-line") {
					t.Errorf("fsck does not report the tampered journal: %s", r)
				}
			}
			for _, cmd := range commands {
				var stop chan struct{}
				var wg sync.WaitGroup
				if c.during != nil {
					stop = make(chan struct{})
					wg.Add(1)
					go func() { defer wg.Done(); c.during(h, stop) }()
				}
				r := pisess(t, cmd.args(h, cid)...)
				if stop != nil {
					close(stop)
					wg.Wait()
				}
				if after := h.snapshot(t); after != before {
					t.Fatalf("%s changed something outside the tree:\nbefore:\n%s\nafter:\n%s\n%s", cmd.name, before, after, r)
				}
				if cmd.name == "rollback" && cid == forgedRun && (r.code != 4 || !strings.Contains(r.stdout+r.stderr, "refused")) {
					t.Errorf("rollback of the forged run is not refused: %s", r)
				}
				if os.Geteuid() == 0 {
					h.checkOwned(t, cmd.name)
				}
			}
		})
	}
}

// checkOwned fails when anything in the tree belongs to root: a root run
// works as the tree's owner, so all it creates is the owner's.
func (h *hostileTree) checkOwned(t *testing.T, after string) {
	t.Helper()
	_ = filepath.WalkDir(h.tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != hostileUID && st.Nlink == 1 {
			t.Errorf("after %s: %s is owned by uid %d, not the tree's owner", after, p, st.Uid)
		}
		return nil
	})
}

// TestRootRunsAsTreeOwner shows the kernel's guarantee directly: a root
// run over another uid's tree writes its journal as that uid, and cannot
// write where that uid cannot.
func TestRootRunsAsTreeOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	h := newHostileTree(t)
	st, err := os.Lstat(ledger.JournalPath(h.tree))
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != hostileUID {
		t.Fatalf("journal owned by %d, want %d", uid, hostileUID)
	}
	// A log file only root may open still receives the child's logs.
	logFile := filepath.Join(h.base, "root.log")
	if err := os.WriteFile(logFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := pisess(t, "--log-format", "json", "--log-file", logFile, "--log-level", "debug", "fsck", h.tree)
	if r.code != 0 {
		t.Fatalf("fsck: %s", r)
	}
	if b, _ := os.ReadFile(logFile); len(b) == 0 {
		t.Error("the child's log did not reach the root-only log file")
	}
}
