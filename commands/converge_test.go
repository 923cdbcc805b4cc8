package commands

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The damage table of issue 32 §3: damage made by hand in a migrated tree,
// run through every command. For each row:
//
//   - status, verify, fsck and migrate agree: on the session's class (the
//     reference's five, FORMAT.md §9), and on whether it is a problem, a
//     refusal (a notice) or nothing at all;
//   - fsck --repair reaches a clean fsck (exit 0) in at most two runs, or
//     reports what it will not touch and why (exit 4, every problem left
//     with its reason);
//   - the advice migrate prints never points at a repair that does
//     nothing: after the repairs, migrate exits 0;
//   - every file or directory the repairs moved or removed is named by a
//     repaired finding.
//
// The tests read the --json reports through the local types below, not the
// engine's: they test what a script sees.

// jsonStatus, jsonVerify, jsonFsck and jsonMigrate are the parts of the
// reports (the envelope's detail) the table looks at.
type jsonStatus struct {
	Sessions []struct {
		Path   string `json:"path"`
		Class  string `json:"class"`
		Reason string `json:"reason"`
		Error  string `json:"error"`
	} `json:"sessions"`
	Skipped []jsonSkipped `json:"skippedEntries"`
}

type jsonSkipped struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

type jsonVerify struct {
	Sessions []struct {
		Path     string `json:"path"`
		Verified bool   `json:"verified"`
		Error    string `json:"error"`
	} `json:"sessions"`
	Failed  int           `json:"failed"`
	Skipped []jsonSkipped `json:"skippedEntries"`
}

type jsonFinding struct {
	Code        string `json:"code"`
	Path        string `json:"path"`
	Detail      string `json:"detail"`
	Action      string `json:"action"`
	Repair      string `json:"repair"`
	Notice      bool   `json:"notice"`
	Repaired    bool   `json:"repaired"`
	RepairError string `json:"repairError"`
}

type jsonFsck struct {
	CorrelationID string `json:"correlationId"`
	Trees         []struct {
		Root     string        `json:"root"`
		Findings []jsonFinding `json:"findings"`
		Sessions []struct {
			Path     string        `json:"path"`
			Class    string        `json:"class"`
			After    string        `json:"classAfterRepair"`
			Findings []jsonFinding `json:"findings"`
		} `json:"sessions"`
		Skipped []jsonSkipped `json:"skippedEntries"`
	} `json:"trees"`
}

func (r jsonFsck) findings() []jsonFinding {
	var out []jsonFinding
	for _, t := range r.Trees {
		out = append(out, t.Findings...)
		for _, s := range t.Sessions {
			out = append(out, s.Findings...)
		}
	}
	return out
}

func (r jsonFsck) class(session string) string {
	for _, t := range r.Trees {
		for _, s := range t.Sessions {
			if s.Path == session {
				return s.Class
			}
		}
	}
	return ""
}

type jsonMigrate struct {
	CorrelationID string `json:"correlationId"`
	Sessions      []struct {
		Path    string `json:"path"`
		Action  string `json:"action"`
		Reason  string `json:"reason"`
		Outcome string `json:"outcome"`
		Error   *struct {
			Class   string `json:"class"`
			Message string `json:"message"`
			Line    int64  `json:"line"`
		} `json:"error"`
	} `json:"sessions"`
	Skipped []jsonSkipped `json:"skippedEntries"`
}

// run is one command's answer: its exit status, its report (nil when it
// printed an error document instead) and what it printed.
type cmdRun[R any] struct {
	code   int
	rep    *R
	out    result
	errMsg string // the error document's message, when there is one
}

// runJSON runs pisess with --json and decodes the envelope's detail into R.
func runJSON[R any](tb testing.TB, args ...string) cmdRun[R] {
	tb.Helper()
	r := pisess(tb, append([]string{args[0], "--json"}, args[1:]...)...)
	out := cmdRun[R]{code: r.code, out: r}
	var env struct {
		Detail json.RawMessage `json:"detail"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &env); err != nil {
		tb.Fatalf("%v: stdout is not one JSON document: %v\n%s", args, err, r)
	}
	if env.Error != nil {
		out.errMsg = env.Error.Message
	}
	if len(env.Detail) > 0 && string(env.Detail) != "null" {
		var rep R
		if err := json.Unmarshal(env.Detail, &rep); err != nil {
			tb.Fatalf("%v: detail: %v\n%s", args, err, r)
		}
		out.rep = &rep
	}
	return out
}

// convTree is a tree of one session, <root>/--p--/<name>, and its sidecar.
type convTree struct {
	base, root, dir, session, sidecar string
	owned                             bool // given to hostileUID
}

// newConvTree writes a session with the given bytes; with owned (as root)
// the tree is given to hostileUID, so that every command runs as that
// owner (owner.go), as root's cron runs do over users' trees.
func newConvTree(t *testing.T, name string, data []byte, owned bool) *convTree {
	t.Helper()
	if owned && os.Geteuid() != 0 {
		t.Skip("needs root: the tree belongs to another uid")
	}
	base := t.TempDir()
	if owned {
		// The owner's child must reach the tree: t.TempDir's parents are 0700.
		for d := base; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := &convTree{base: base, root: filepath.Join(base, "tree"), owned: owned}
	c.dir = filepath.Join(c.root, "--p--")
	c.session = filepath.Join(c.dir, name)
	c.sidecar = filepath.Join(c.dir, strings.TrimSuffix(name, filepath.Ext(name))+".v2")
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(c.root, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.session, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c.chown(t)
	return c
}

// chown gives everything in the tree to hostileUID when the tree is owned.
func (c *convTree) chown(t *testing.T) {
	t.Helper()
	if !c.owned {
		return
	}
	err := filepath.WalkDir(c.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, hostileUID, hostileUID)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (c *convTree) migrate(t *testing.T) {
	t.Helper()
	if r := pisess(t, "migrate", "--json", "--correlation-id", "converge-setup-01", c.root); r.code != ExitClean {
		t.Fatalf("setup migrate: %s", r)
	}
}

func (c *convTree) rel(p string) string {
	if r, err := filepath.Rel(c.root, p); err == nil {
		return r
	}
	return p
}

// verdicts is what the four commands said about the tree.
type verdicts struct {
	status  cmdRun[jsonStatus]
	verify  cmdRun[jsonVerify]
	fsck    cmdRun[jsonFsck]
	migrate cmdRun[jsonMigrate]
}

func (c *convTree) observe(t *testing.T, withMigrate bool) verdicts {
	t.Helper()
	v := verdicts{
		status: runJSON[jsonStatus](t, "status", c.root),
		verify: runJSON[jsonVerify](t, "verify", c.root),
		fsck:   runJSON[jsonFsck](t, "fsck", c.root),
	}
	if withMigrate {
		v.migrate = runJSON[jsonMigrate](t, "migrate", c.root)
	}
	return v
}

func (v verdicts) String() string {
	return fmt.Sprintf("status:\n%s\nverify:\n%s\nfsck:\n%s\nmigrate:\n%s", v.status.out, v.verify.out, v.fsck.out, v.migrate.out)
}

// statusClass is the class status gives the session ("" when it does not
// list it).
func (v verdicts) statusClass(session string) string {
	if v.status.rep == nil {
		return ""
	}
	for _, s := range v.status.rep.Sessions {
		if s.Path == session {
			return s.Class
		}
	}
	return ""
}

func (v verdicts) migrated(session string) (action, outcome, reason string, ok bool) {
	if v.migrate.rep == nil {
		return "", "", "", false
	}
	for _, s := range v.migrate.rep.Sessions {
		if s.Path == session {
			reason = s.Reason
			if s.Error != nil {
				reason += " | " + s.Error.Class + ": " + s.Error.Message
			}
			return s.Action, s.Outcome, reason, true
		}
	}
	return "", "", "", false
}

// entryState describes what is at a path of a tree, for the repairs'
// moves: its type and identity.
type entryState struct {
	mode     fs.FileMode
	dev, ino uint64
}

// treeEntries lists every path of the tree outside .pisess/ (the repairs'
// own quarantine, journal and caches) by its state.
func treeEntries(t *testing.T, root string) map[string]entryState {
	t.Helper()
	out := map[string]entryState{}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p == filepath.Join(root, ".pisess") {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		out[p] = entryState{mode: fi.Mode().Type(), dev: uint64(st.Dev), ino: st.Ino}
		return nil
	})
	return out
}

// checkMovesReported fails for every path of before that a repair run
// moved or removed (gone, or another file now) without a repaired finding
// naming it or a directory above it.
func checkMovesReported(t *testing.T, before, after map[string]entryState, rep *jsonFsck, run int) {
	t.Helper()
	var repaired []string
	if rep != nil {
		for _, f := range rep.findings() {
			if f.Repaired && !f.Notice {
				repaired = append(repaired, f.Path)
			}
		}
	}
	for p, st := range before {
		if now, ok := after[p]; ok && now == st {
			continue
		}
		if _, parentGone := before[filepath.Dir(p)]; parentGone {
			if now, ok := after[filepath.Dir(p)]; !ok || now != before[filepath.Dir(p)] {
				continue // reported (or not) with its directory
			}
		}
		named := false
		for _, r := range repaired {
			if r == p || strings.HasPrefix(p, r+string(filepath.Separator)) {
				named = true
			}
		}
		if !named {
			t.Errorf("fsck --repair run %d moved or removed %s without a repaired finding naming it (repaired: %v)", run, p, repaired)
		}
	}
}

// convergeKind is what a row's damage is, and so what every command must
// say about it.
type convergeKind int

const (
	// kindDamage: the sidecar is damaged; class is the reference's. Every
	// command but status reports a problem (status reports the class);
	// fsck --repair mends it.
	kindDamage convergeKind = iota
	// kindTree: the tree's own .pisess/ is damaged: migrate and fsck give
	// the same exit status (not 0), fsck --repair mends it.
	kindTree
	// kindIO: the source cannot be read (an I/O failure, never a
	// refusal): a problem in every command, fsck --repair leaves it and
	// says why (exit 4), moving nothing unreported.
	kindIO
	// kindRefusal: the reference refuses the session: a notice (exit 0) in
	// every command, with the reason, cached in refused.json.
	kindRefusal
)

type convergeCase struct {
	name string
	// file is the session's name (default s.jsonl); data its bytes
	// (default the example session).
	file string
	data func(t *testing.T) []byte
	// owned gives the tree to hostileUID (needs root).
	owned bool
	// noMigrate leaves the session unmigrated before the damage.
	noMigrate bool
	damage    func(t *testing.T, c *convTree)
	kind      convergeKind
	// class is the class status and fsck must give before the repair.
	class string
	// says is a text the problem or refusal must be reported with.
	says string
}

func exampleBytes(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(exampleSession)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func replaceWithDir(mode os.FileMode) func(t *testing.T, p string) {
	return func(t *testing.T, p string) {
		t.Helper()
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
}

func replaceWithFile(data string) func(t *testing.T, p string) {
	return func(t *testing.T, p string) {
		t.Helper()
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func replaceWithFIFO(t *testing.T, p string) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
}

// replaceWithSymlink moves p beside the tree (its bytes are kept there)
// and leaves a symlink to it in its place.
func replaceWithSymlink(t *testing.T, c *convTree, p string) {
	t.Helper()
	aside := filepath.Join(c.base, "aside-"+filepath.Base(p))
	if err := os.Rename(p, aside); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(aside, p); err != nil {
		t.Fatal(err)
	}
}

func pisessPath(c *convTree, name string) string { return filepath.Join(c.root, ".pisess", name) }

func convergeCases() []convergeCase {
	sidecarPart := func(part string, change func(t *testing.T, p string)) func(t *testing.T, c *convTree) {
		return func(t *testing.T, c *convTree) { change(t, filepath.Join(c.sidecar, part)) }
	}
	return []convergeCase{
		// issue 32 §3: fails on 65304d8 (verify and fsck exit 0 and call it
		// migrated, fsck --repair does nothing, while status says corrupt
		// and migrate needs_repair on every run).
		{name: "manifest.json is a directory 0700", kind: kindDamage, class: "corrupt", says: "manifest.json",
			damage: sidecarPart("manifest.json", replaceWithDir(0o700))},
		// issue 32 §3: fails on 65304d8 (the repair only chmods it: status
		// and migrate still say corrupt afterwards).
		{name: "manifest.json is a directory 0755", kind: kindDamage, class: "corrupt", says: "manifest.json",
			damage: sidecarPart("manifest.json", replaceWithDir(0o755))},
		// issue 32 §3: fails on 65304d8 (fsck --repair promises a rebuild
		// and fails at the cutover on every run).
		{name: "the sidecar is a regular file", kind: kindDamage, class: "corrupt", says: "not a directory",
			damage: func(t *testing.T, c *convTree) { replaceWithFile("not a store\n")(t, c.sidecar) }},
		// issue 32 §3: fails on 65304d8 (as above).
		{name: "the sidecar is a FIFO", kind: kindDamage, class: "corrupt", says: "not a directory",
			damage: func(t *testing.T, c *convTree) { replaceWithFIFO(t, c.sidecar) }},
		// issue 32 §3: fails on 65304d8 (verify 0, fsck 0: not reported).
		{name: "migrations/ledger.jsonl is a directory", kind: kindDamage, class: "migrated", says: "ledger.jsonl",
			damage: sidecarPart("migrations/ledger.jsonl", replaceWithDir(0o700))},
		// issue 32 §3: fails on 65304d8 (verify 0, fsck 0: not reported).
		{name: "migrations/ledger.jsonl is empty", kind: kindDamage, class: "migrated", says: "ledger.jsonl",
			damage: sidecarPart("migrations/ledger.jsonl", replaceWithFile(""))},
		// issue 32 §3: fails on 65304d8 (verify 0, fsck 0: not reported;
		// every change pi makes to the store takes this lock).
		{name: "store.mutation.lock is a directory", kind: kindDamage, class: "migrated", says: "store.mutation.lock",
			damage: sidecarPart("store.mutation.lock", replaceWithDir(0o700))},
		// issue 32 §3: fails on 65304d8 (verify 0, fsck 0; the reference's
		// open_for_inspection refuses a tmp/ that is not a private
		// directory, so its status says corrupt).
		{name: "tmp is a file", kind: kindDamage, class: "corrupt", says: "tmp",
			damage: sidecarPart("tmp", replaceWithFile("x"))},
		// issue 32 §3: fails on 65304d8 (exit 8 everywhere, fsck --repair
		// cannot mend it).
		{name: ".pisess/lock is a directory", kind: kindTree, says: ".pisess/lock",
			damage: func(t *testing.T, c *convTree) { replaceWithDir(0o700)(t, pisessPath(c, "lock")) }},
		// issue 32 §3: fails on 65304d8 (as above).
		{name: ".pisess/lock is a FIFO", kind: kindTree, says: ".pisess/lock",
			damage: func(t *testing.T, c *convTree) { replaceWithFIFO(t, pisessPath(c, "lock")) }},
		// issue 32 §3: fails on 65304d8 (as above).
		{name: ".pisess/lock is a symlink", kind: kindTree, says: ".pisess/lock",
			damage: func(t *testing.T, c *convTree) { replaceWithSymlink(t, c, pisessPath(c, "lock")) }},
		// issue 32 §3: fails on 65304d8 (fsck exit 8 and cannot mend it,
		// migrate fails every session it writes).
		{name: ".pisess/journal.jsonl is a directory", kind: kindTree, says: "journal.jsonl",
			damage: func(t *testing.T, c *convTree) {
				appendFile(t, c.session, appendedEntry) // a session to write
				replaceWithDir(0o700)(t, pisessPath(c, "journal.jsonl"))
			}},
		// issue 32 §3: fails on 65304d8 (as above).
		{name: ".pisess/journal.jsonl is a FIFO", kind: kindTree, says: "journal.jsonl",
			damage: func(t *testing.T, c *convTree) {
				appendFile(t, c.session, appendedEntry)
				replaceWithFIFO(t, pisessPath(c, "journal.jsonl"))
			}},
		// issue 32 §3: fails on 65304d8 (as above).
		{name: ".pisess/journal.jsonl is a symlink", kind: kindTree, says: "journal.jsonl",
			damage: func(t *testing.T, c *convTree) {
				appendFile(t, c.session, appendedEntry)
				replaceWithSymlink(t, c, pisessPath(c, "journal.jsonl"))
			}},
		// issue 32 §3: fails on 65304d8 (exit 8 everywhere, fsck --repair
		// cannot mend it).
		{name: ".pisess is a file", kind: kindTree, says: ".pisess",
			damage: func(t *testing.T, c *convTree) {
				if err := os.Rename(filepath.Join(c.root, ".pisess"), filepath.Join(c.base, "old-pisess")); err != nil {
					t.Fatal(err)
				}
				replaceWithFile("not a directory\n")(t, filepath.Join(c.root, ".pisess"))
			}},
		// issue 32 §3: fails on 65304d8 (migrate: a refusal at line 1, exit
		// 0; fsck: [corrupt] with notices only, exit 0; fsck --repair moves
		// the stale sidecar to the quarantine, reporting 0 problems).
		{name: "the source is unreadable (mode 000, run as its owner)", kind: kindIO, owned: true, class: "corrupt",
			says: "permission denied", damage: func(t *testing.T, c *convTree) {
				appendFile(t, c.session, appendedEntry) // stale: a repair would rebuild it
				if err := os.Chmod(c.session, 0); err != nil {
					t.Fatal(err)
				}
			}},
		// issue 32 §3: fails on 65304d8 (status migrated, migrate skips it,
		// fsck --repair: "rebuild index: ... torn tail", exit 4 on every
		// run, never the rebuild from the source).
		{name: "a segment cut back into earlier frames", kind: kindDamage, class: "corrupt", says: "segment",
			data: func(t *testing.T) []byte { return longSession(5000) }, damage: func(t *testing.T, c *convTree) {
				seg := filepath.Join(c.sidecar, "segments", "0000000000000001.seg")
				if err := os.Truncate(seg, fileSize(t, seg)-1000); err != nil {
					t.Fatal(err)
				}
			}},
		// issue 32 §3: fails on 65304d8 ("skipped, not a session: not a
		// SQLite database" in every command, exit 0).
		{name: "an unreadable .sqlite (mode 000, run as its owner)", kind: kindIO, owned: true, noMigrate: true,
			class: "unmigrated", file: "s.sqlite", says: "permission denied",
			data: func(t *testing.T) []byte { return sqliteBytes(t) }, damage: func(t *testing.T, c *convTree) {
				if err := os.Chmod(c.session, 0); err != nil {
					t.Fatal(err)
				}
			}},
		// issue 32 §3: fails on 65304d8 (migrate exit 4 on every run,
		// fsck 0: a failure where the reference refuses).
		{name: "one entry larger than a segment", kind: kindRefusal, noMigrate: true, class: "unmigrated",
			says: "segment", data: func(t *testing.T) []byte { return oversizedEntrySession(t, 70<<20) }},
		// issue 32 §3: fails on 65304d8 (ENAMETOOLONG on the staging
		// directory: migrate exit 4 on every run, fsck 0).
		{name: "a file name too long for its staging directory", kind: kindRefusal, noMigrate: true, class: "unmigrated",
			file: strings.Repeat("n", 234) + ".jsonl", says: "name"},
	}
}

// longSession is a valid v3 session of n entries, each the child of the
// one before.
func longSession(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"type":"session","version":3,"id":"3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b","timestamp":"2026-01-05T10:00:00.000Z","cwd":"/w"}` + "\n")
	parent := "null"
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"type":"message","id":"%08x","parentId":%s,"timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"entry %d","timestamp":1}}`+"\n", i, parent, i)
		parent = fmt.Sprintf(`"%08x"`, i)
	}
	return []byte(b.String())
}

// oversizedEntrySession is the example session with one more message
// whose content is size bytes: its frame exceeds the reference's 64 MiB
// segment (session.rs builds with SessionStoreV2::create(.., 64 MiB), and
// append_entry refuses a frame over it: validate_encoded_frame_length).
func oversizedEntrySession(t *testing.T, size int) []byte {
	b := exampleBytes(t)
	entry := `{"type":"message","id":"bb000001","parentId":"e1f2a3b4","timestamp":"2026-01-05T11:00:00.000Z","message":{"role":"user","content":"` +
		strings.Repeat("x", size) + `","timestamp":1}}` + "\n"
	return append(b, entry...)
}

// sqliteBytes is the example session as a sqlite_v1 database.
func sqliteBytes(t *testing.T) []byte {
	t.Helper()
	db := filepath.Join(t.TempDir(), "s.sqlite")
	writeSQLiteSession(t, exampleSession, db)
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDamageConverges runs the damage table of issue 32 §3 through every
// command. issue 32 §3: fails on 65304d8 (every row; each row's comment
// says how).
func TestDamageConverges(t *testing.T) {
	for _, tc := range convergeCases() {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.file
			if file == "" {
				file = "s.jsonl"
			}
			data := exampleBytes
			if tc.data != nil {
				data = tc.data
			}
			c := newConvTree(t, file, data(t), tc.owned)
			if !tc.noMigrate {
				c.migrate(t)
			}
			if tc.damage != nil {
				tc.damage(t, c)
			}
			switch tc.kind {
			case kindDamage:
				checkDamage(t, c, tc)
			case kindTree:
				checkTreeDamage(t, c, tc)
			case kindIO:
				checkIOFailure(t, c, tc)
			case kindRefusal:
				checkRefusal(t, c, tc)
			}
		})
	}
}

// checkClasses fails unless status and fsck give the session the class.
func checkClasses(t *testing.T, c *convTree, v verdicts, class string) {
	t.Helper()
	if got := v.statusClass(c.session); got != class {
		t.Errorf("status calls %s %q, want %q\n%s", c.rel(c.session), got, class, v.status.out)
	}
	if v.fsck.rep == nil || v.fsck.rep.class(c.session) != class {
		got := ""
		if v.fsck.rep != nil {
			got = v.fsck.rep.class(c.session)
		}
		t.Errorf("fsck calls %s %q, want %q\n%s", c.rel(c.session), got, class, v.fsck.out)
	}
}

// reported reports whether a problem (not a notice) of the report says
// text in its path or detail.
func reported(rep *jsonFsck, text string, notice bool) bool {
	if rep == nil {
		return false
	}
	for _, f := range rep.findings() {
		if f.Notice == notice && (strings.Contains(f.Path, text) || strings.Contains(f.Detail, text)) {
			return true
		}
	}
	return false
}

func checkDamage(t *testing.T, c *convTree, tc convergeCase) {
	v := c.observe(t, true)
	checkClasses(t, c, v, tc.class)
	if v.verify.code != ExitProblems {
		t.Errorf("verify exit %d, want 4 (the sidecar is damaged)\n%s", v.verify.code, v.verify.out)
	}
	if v.fsck.code != ExitProblems || !reported(v.fsck.rep, tc.says, false) {
		t.Errorf("fsck exit %d, want 4 with a problem naming %q\n%s", v.fsck.code, tc.says, v.fsck.out)
	}
	action, outcome, reason, _ := v.migrated(c.session)
	if action == "skip" {
		t.Errorf("migrate skips the damaged sidecar as fresh (%s: %s)", outcome, reason)
	}
	converge(t, c)
}

// converge runs fsck --repair at most twice; fsck must then exit 0, and
// migrate (whatever it advised before) too.
func converge(t *testing.T, c *convTree) {
	t.Helper()
	clean := false
	for i := 1; i <= 2 && !clean; i++ {
		before := treeEntries(t, c.root)
		r := runJSON[jsonFsck](t, "fsck", "--repair", c.root)
		checkMovesReported(t, before, treeEntries(t, c.root), r.rep, i)
		if r.code != ExitClean && r.code != ExitRepaired {
			t.Logf("fsck --repair run %d: exit %d\n%s", i, r.code, r.out)
			continue
		}
		f := runJSON[jsonFsck](t, "fsck", c.root)
		clean = f.code == ExitClean
		if !clean {
			t.Logf("fsck after fsck --repair run %d (exit %d): exit %d\n%s", i, r.code, f.code, f.out)
		}
	}
	if !clean {
		t.Fatalf("fsck --repair did not reach a clean fsck in two runs")
	}
	v := c.observe(t, true)
	if v.verify.code != ExitClean || v.migrate.code != ExitClean || v.statusClass(c.session) != "migrated" {
		t.Errorf("after the repair: verify exit %d, migrate exit %d, status %q; want 0, 0, migrated\n%s",
			v.verify.code, v.migrate.code, v.statusClass(c.session), v)
	}
}

func checkTreeDamage(t *testing.T, c *convTree, tc convergeCase) {
	v := c.observe(t, true)
	if v.fsck.code == ExitClean || v.migrate.code == ExitClean {
		t.Errorf("fsck exit %d, migrate exit %d: the damaged %s must stop both\n%s", v.fsck.code, v.migrate.code, tc.says, v)
	}
	if v.fsck.code != v.migrate.code {
		t.Errorf("fsck exits %d and migrate %d over the same damage (%s)\n%s", v.fsck.code, v.migrate.code, tc.says, v)
	}
	for _, r := range []result{v.fsck.out, v.migrate.out} {
		if !strings.Contains(r.stdout+r.stderr, tc.says) {
			t.Errorf("the error does not name %s:\n%s", tc.says, r)
		}
	}
	converge(t, c)
}

func checkIOFailure(t *testing.T, c *convTree, tc convergeCase) {
	v := c.observe(t, true)
	checkClasses(t, c, v, tc.class)
	for _, r := range []struct {
		what string
		sk   []jsonSkipped
	}{{"status", skippedOf(v.status.rep)}, {"fsck", skippedOfFsck(v.fsck.rep)}, {"migrate", skippedOfMigrate(v.migrate.rep)}} {
		for _, s := range r.sk {
			if s.Path == c.session {
				t.Errorf("%s skips %s as %s (%s): a file it cannot read is not a file it knows is no session", r.what, c.rel(c.session), s.Kind, s.Reason)
			}
		}
	}
	if v.fsck.code != ExitProblems || !reported(v.fsck.rep, tc.says, false) {
		t.Errorf("fsck exit %d, want 4 with a problem saying %q (an I/O failure, not a notice)\n%s", v.fsck.code, tc.says, v.fsck.out)
	}
	if c.sidecarExists() && v.verify.code != ExitProblems {
		t.Errorf("verify exit %d, want 4\n%s", v.verify.code, v.verify.out)
	}
	action, outcome, reason, ok := v.migrated(c.session)
	if v.migrate.code != ExitProblems || !ok || outcome != "failed" || !strings.Contains(reason, tc.says) {
		t.Errorf("migrate exit %d, %s/%s (%s); want exit 4, failed, saying %q\n%s", v.migrate.code, action, outcome, reason, tc.says, v.migrate.out)
	}
	if cached := refusalCache(t, c.root); strings.Contains(cached, filepath.Base(c.session)) {
		t.Errorf("refused.json remembers the I/O failure as a refusal: %s", cached)
	}
	// fsck --repair cannot read the source either: it says so, and moves
	// nothing it does not report.
	had := c.sidecarExists()
	for i := 1; i <= 2; i++ {
		before := treeEntries(t, c.root)
		r := runJSON[jsonFsck](t, "fsck", "--repair", c.root)
		checkMovesReported(t, before, treeEntries(t, c.root), r.rep, i)
		if r.code != ExitProblems || !reportedLeft(r.rep, tc.says) {
			t.Errorf("fsck --repair run %d: exit %d, want 4 with the problem left saying %q\n%s", i, r.code, tc.says, r.out)
		}
	}
	if had && !c.sidecarExists() {
		t.Errorf("fsck --repair removed the sidecar of a session it could not read")
	}
}

// reportedLeft reports whether a problem left by a repair says text.
func reportedLeft(rep *jsonFsck, text string) bool {
	if rep == nil {
		return false
	}
	for _, f := range rep.findings() {
		if !f.Notice && !f.Repaired && (strings.Contains(f.Detail, text) || strings.Contains(f.RepairError, text)) {
			return true
		}
	}
	return false
}

func checkRefusal(t *testing.T, c *convTree, tc convergeCase) {
	v := c.observe(t, true)
	checkClasses(t, c, v, tc.class)
	action, outcome, reason, ok := v.migrated(c.session)
	if v.migrate.code != ExitClean || !ok || outcome != "refused" || !strings.Contains(reason, tc.says) {
		t.Errorf("migrate exit %d, %s/%s (%s); want exit 0, refused, saying %q\n%s", v.migrate.code, action, outcome, reason, tc.says, v.migrate.out)
	}
	if cached := refusalCache(t, c.root); !strings.Contains(cached, filepath.Base(c.session)) {
		t.Errorf("refused.json does not remember the refusal: %q", cached)
	}
	if v.fsck.code != ExitClean || !reported(v.fsck.rep, tc.says, true) {
		t.Errorf("fsck exit %d, want 0 with a notice saying %q\n%s", v.fsck.code, tc.says, v.fsck.out)
	}
	if v.verify.code != ExitClean {
		t.Errorf("verify exit %d, want 0\n%s", v.verify.code, v.verify.out)
	}
	again := runJSON[jsonMigrate](t, "migrate", c.root)
	if again.code != ExitClean {
		t.Errorf("second migrate exit %d, want 0\n%s", again.code, again.out)
	}
}

func (c *convTree) sidecarExists() bool {
	_, err := os.Lstat(c.sidecar)
	return err == nil
}

// refusalCache returns the tree's .pisess/refused.json ("" when none).
func refusalCache(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".pisess", "refused.json"))
	if err != nil {
		return ""
	}
	return string(b)
}

func skippedOf(r *jsonStatus) []jsonSkipped {
	if r == nil {
		return nil
	}
	return r.Skipped
}

func skippedOfFsck(r *jsonFsck) []jsonSkipped {
	if r == nil {
		return nil
	}
	var out []jsonSkipped
	for _, t := range r.Trees {
		out = append(out, t.Skipped...)
	}
	return out
}

func skippedOfMigrate(r *jsonMigrate) []jsonSkipped {
	if r == nil {
		return nil
	}
	return r.Skipped
}
