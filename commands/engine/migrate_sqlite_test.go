package engine

import (
	"database/sql"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"pisess/fixtures"
	"pisess/fixtures/trees"
	"pisess/readers/discover"
)

// migSQLiteSchema is the reference's schema (session_sqlite.rs INIT_SQL,
// FORMAT.md §10).
var migSQLiteSchema = []string{
	"PRAGMA journal_mode = WAL",
	"PRAGMA synchronous = NORMAL",
	"PRAGMA foreign_keys = ON",
	"CREATE TABLE IF NOT EXISTS pi_session_header (id TEXT PRIMARY KEY, json TEXT NOT NULL)",
	"CREATE TABLE IF NOT EXISTS pi_session_entries (seq INTEGER PRIMARY KEY, json TEXT NOT NULL)",
	"CREATE TABLE IF NOT EXISTS pi_session_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
}

// migSQLite writes the JSONL session src into a new pi SQLite session at
// path, as the Rust pi's SQLite backend stores it, and closes it cleanly
// (its WAL checkpointed and removed).
func migSQLite(tb testing.TB, src, path string) {
	tb.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var h struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil {
		tb.Fatal(err)
	}
	d, err := sql.Open("sqlite", path)
	if err != nil {
		tb.Fatal(err)
	}
	defer d.Close()
	d.SetMaxOpenConns(1)
	exec := func(q string, args ...any) {
		tb.Helper()
		if _, err := d.Exec(q, args...); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
	for _, q := range migSQLiteSchema {
		exec(q)
	}
	exec("INSERT INTO pi_session_header(id, json) VALUES(?, ?)", h.ID, lines[0])
	messages := 0
	for i, l := range lines[1:] {
		exec("INSERT INTO pi_session_entries(seq, json) VALUES(?, ?)", i+1, l)
		if strings.HasPrefix(l, `{"type":"message"`) {
			messages++
		}
	}
	exec("INSERT INTO pi_session_meta(key, value) VALUES('message_count', ?)", strconv.Itoa(messages))
	exec("INSERT INTO pi_session_meta(key, value) VALUES('name', '')")
	if err := d.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// TestMigrateSQLite migrates a pi SQLite session: its sidecar is built from
// the database, verified against it, says sourceFormat "sqlite_v1", holds
// the same frames and index as the JSONL session it was made from (the
// reference's bytes), and the report notes that pi's resume reads sidecars
// of JSONL sessions only. The database is not changed.
func TestMigrateSQLite(t *testing.T) {
	v := trees.Only(trees.Vectors(t, trees.Accept), "accept/tricky")[0]
	dir := t.TempDir()
	cwd := filepath.Join(dir, trees.CwdDir)
	if err := os.Mkdir(cwd, 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(cwd, "2026-01-05T10-00-00-000Z_sqlite.sqlite")
	migSQLite(t, v.Source, db)
	before := fixtures.SHA256File(t, db)
	listing := migDirNames(t, cwd)

	rep := migRun(t, migOptions(dir))
	s := migResult(t, rep, db)
	if s.Outcome != OutcomeDone || s.SourceFormat != "sqlite_v1" || s.Entries != 11 {
		t.Fatalf("%s/%s format %s entries %d: %+v", s.Action, s.Outcome, s.SourceFormat, s.Entries, s.Error)
	}
	migAllVerified(t, s)
	if !migHasNote(s, "JSONL") {
		t.Errorf("no note that pi's resume reads JSONL sidecars only: %q", s.Notes)
	}
	sidecar := discover.SidecarPath(db)
	var m struct {
		SourceFormat string `json:"sourceFormat"`
		SessionID    string `json:"sessionId"`
	}
	b, err := os.ReadFile(filepath.Join(sidecar, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil || m.SourceFormat != "sqlite_v1" || m.SessionID != "3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b" {
		t.Errorf("manifest %+v (%v)", m, err)
	}
	for _, rel := range []string{"segments/0000000000000001.seg", "index/offsets.jsonl"} {
		if fixtures.SHA256File(t, filepath.Join(sidecar, rel)) != fixtures.SHA256File(t, filepath.Join(v.Reference, rel)) {
			t.Errorf("%s differs from the JSONL reference's", rel)
		}
	}
	uid, gid := migOwner(t, db)
	migCheckInstalled(t, db, rep.CorrelationID, uid, gid)
	if fixtures.SHA256File(t, db) != before {
		t.Error("the database changed")
	}
	after := migDirNames(t, cwd)
	for name := range after {
		if !listing[name] && name != filepath.Base(sidecar) && name != filepath.Base(db)+".lock" {
			t.Errorf("migrate left %s beside the database", name)
		}
	}
	if again := migResult(t, migRun(t, migOptions(dir)), db); again.Outcome != OutcomeSkipped {
		t.Errorf("re-run: %s/%s", again.Action, again.Outcome)
	}
}

// TestMigrateSQLiteJSONLTwin: foo.sqlite and foo.jsonl would both claim
// foo.v2, so the SQLite one is refused and the JSONL one migrated.
func TestMigrateSQLiteJSONLTwin(t *testing.T) {
	dir, vs := migVectorsTree(t, trees.Only(trees.Vectors(t, trees.Accept), "accept/tricky"))
	jsonl := vs[0].Path
	db := strings.TrimSuffix(jsonl, ".jsonl") + ".sqlite"
	migSQLite(t, vs[0].Source, db)
	before := fixtures.SHA256File(t, db)
	rep := migRun(t, migOptions(dir))
	if len(rep.Sessions) != 2 {
		t.Fatalf("%d sessions", len(rep.Sessions))
	}
	s := migResult(t, rep, db)
	if s.Outcome != OutcomeRefused || s.Error == nil || s.Error.Class != string(discover.ClassSidecarConflict) ||
		!strings.Contains(s.Reason, filepath.Base(jsonl)) {
		t.Errorf("sqlite twin: %s/%s %q %+v", s.Action, s.Outcome, s.Reason, s.Error)
	}
	j := migResult(t, rep, jsonl)
	if j.Outcome != OutcomeDone || j.SourceFormat != "jsonl_v3" {
		t.Fatalf("jsonl twin: %s/%s %+v", j.Action, j.Outcome, j.Error)
	}
	trees.SameStore(t, vs[0].Sidecar(), vs[0].Reference)
	if fixtures.SHA256File(t, db) != before {
		t.Error("the database changed")
	}
	if _, err := os.Lstat(db + ".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused database got a lock file (%v)", err)
	}
}

func migHasNote(s SessionResult, sub string) bool {
	for _, n := range s.Notes {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

func migDirNames(tb testing.TB, dir string) map[string]bool {
	tb.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range es {
		out[e.Name()] = true
	}
	return out
}

// TestSQLiteDisplacedJudgedByItsEntries is issue 34 §3 (bounded disk): the
// sidecar a SQLite session's refresh displaces is not kept when the
// database still holds its entries (the same session, the same first
// entries: its chain is the new build's after as many), as a JSONL
// session's is not when the file still begins with its bytes; it is kept
// when the database's rows were rewritten.
func TestSQLiteDisplacedJudgedByItsEntries(t *testing.T) {
	tree := t.TempDir()
	db := filepath.Join(tree, trees.CwdDir, "s.sqlite")
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(n int, edit func(string) string) {
		t.Helper()
		src, _ := migSession(t, t.TempDir(), "s", n)
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			b = []byte(edit(string(b)))
		}
		if err := os.WriteFile(src, b, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Remove(db)
		migSQLite(t, src, db)
	}
	write(5, nil)
	migRun(t, migOptions(tree))
	write(7, nil) // pi appended two entries
	s := migResult(t, migRun(t, migOptions(tree)), db)
	if s.Outcome != OutcomeDone || s.Displaced != "" {
		t.Fatalf("appended: %s %s displaced %q %v", s.Action, s.Outcome, s.Displaced, s.Notes)
	}
	write(7, func(b string) string { return strings.Replace(b, "message e0000001", "rewritten e0000001", 1) })
	s = migResult(t, migRun(t, migOptions(tree)), db)
	if s.Outcome != OutcomeDone || s.Displaced == "" {
		t.Fatalf("rewritten: %s %s displaced %q %v", s.Action, s.Outcome, s.Displaced, s.Notes)
	}
	if _, err := os.Stat(filepath.Join(s.Displaced, "manifest.json")); err != nil {
		t.Fatalf("the displaced sidecar of rewritten rows is not kept: %v", err)
	}
}
