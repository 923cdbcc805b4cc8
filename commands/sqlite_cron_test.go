package commands

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pisess/ledger"

	"golang.org/x/sys/unix"
)

// sqliteWriter is a pi SQLite session (FORMAT.md §10) and one connection
// to it that stays open, as a long-lived pi process keeps it: WAL journal,
// automatic checkpoints off, so every committed entry lives in <db>-wal
// until the connection checkpoints.
type sqliteWriter struct {
	db      *sql.DB
	path    string
	entries int
	last    string // the id of the last entry
}

const sqliteSessionID = "5b0c6f0e-8f4e-4d8a-9a53-0e7c1d2f3a4b"

func openSQLiteWriter(tb testing.TB, path string, autocheckpoint bool) *sqliteWriter {
	tb.Helper()
	d, err := sql.Open("sqlite", path)
	if err != nil {
		tb.Fatal(err)
	}
	d.SetMaxOpenConns(1)
	w := &sqliteWriter{db: d, path: path}
	stmts := []string{
		"PRAGMA journal_mode = WAL",
		"PRAGMA synchronous = NORMAL",
		"PRAGMA foreign_keys = ON",
		"CREATE TABLE IF NOT EXISTS pi_session_header (id TEXT PRIMARY KEY, json TEXT NOT NULL)",
		"CREATE TABLE IF NOT EXISTS pi_session_entries (seq INTEGER PRIMARY KEY, json TEXT NOT NULL)",
		"CREATE TABLE IF NOT EXISTS pi_session_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
	}
	if !autocheckpoint {
		stmts = append(stmts, "PRAGMA wal_autocheckpoint = 0")
	}
	for _, q := range stmts {
		w.exec(tb, q)
	}
	var n int
	if err := d.QueryRow("SELECT count(*) FROM pi_session_entries").Scan(&n); err != nil {
		tb.Fatal(err)
	}
	if n == 0 {
		w.exec(tb, "INSERT INTO pi_session_header(id, json) VALUES(?, ?)", sqliteSessionID,
			`{"type":"session","version":3,"id":"`+sqliteSessionID+`","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}`)
		w.exec(tb, "INSERT INTO pi_session_meta(key, value) VALUES('message_count', '0'), ('name', '')")
	} else {
		w.entries = n
		w.last = sqliteEntryID(n)
	}
	tb.Cleanup(func() { d.Close() })
	return w
}

func (w *sqliteWriter) exec(tb testing.TB, q string, args ...any) {
	tb.Helper()
	if _, err := w.db.Exec(q, args...); err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
}

func sqliteEntryID(n int) string { return fmt.Sprintf("e%07d", n) }

// add commits n more message entries, each in its own transaction, as pi
// writes them.
func (w *sqliteWriter) add(tb testing.TB, n int) {
	tb.Helper()
	for range n {
		w.entries++
		id := sqliteEntryID(w.entries)
		parent := "null"
		if w.last != "" {
			parent = `"` + w.last + `"`
		}
		entry := fmt.Sprintf(`{"type":"message","id":"%s","parentId":%s,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"entry %d","timestamp":1}}`,
			id, parent, w.entries)
		w.exec(tb, "INSERT INTO pi_session_entries(seq, json) VALUES(?, ?)", w.entries, entry)
		w.exec(tb, "UPDATE pi_session_meta SET value = ? WHERE key = 'message_count'", fmt.Sprint(w.entries))
		w.last = id
	}
}

// close closes the connection: SQLite checkpoints the WAL into the
// database and removes it.
func (w *sqliteWriter) close(tb testing.TB) {
	tb.Helper()
	if err := w.db.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(w.path, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// sessionItem is the --json item of session in a report.
func sessionItem(tb testing.TB, r result, session string) map[string]any {
	tb.Helper()
	items, _ := jsonAt(reportDoc(tb, r.stdout), "items").([]any)
	for _, it := range items {
		if jsonAt(it, "path") == session {
			return it.(map[string]any)
		}
	}
	tb.Fatalf("%s is not in the report:\n%s", session, r)
	return nil
}

// TestSQLiteWALCommitsMakeTheSidecarStale is issue 34 §3 (WAL): a sqlite
// session whose writer keeps its connection open with automatic
// checkpoints off commits entries that live only in <db>-wal; the database
// file itself does not change. pisess's judgment of freshness counts the
// -wal: status says stale, migrate refreshes the sidecar to every
// committed entry — also when the tree's fresh cache holds a verdict on
// the session from an earlier run.
//
// issue 34 §3: fails on 65304d8 (freshness fingerprints the database file
// alone: status "migrated", migrate "up to date", verify fails it with
// entryCountMatch=false).
func TestSQLiteWALCommitsMakeTheSidecarStale(t *testing.T) {
	os.Unsetenv(EnvClock)
	tree := t.TempDir()
	dir := filepath.Join(tree, "--p--")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "s.sqlite")
	w := openSQLiteWriter(t, db, false)
	w.add(t, 20)
	// A JSONL session beside it, which pi appends to: the run that
	// refreshes it writes the fresh cache, with a verdict on the sqlite
	// session (the cron steady state).
	example, err := os.ReadFile(exampleSession)
	if err != nil {
		t.Fatal(err)
	}
	jsonl := filepath.Join(dir, "j.jsonl")
	if err := os.WriteFile(jsonl, example, 0o600); err != nil {
		t.Fatal(err)
	}

	if r := pisess(t, "migrate", "-q", tree); r.code != ExitClean {
		t.Fatalf("migrate: %s", r)
	}
	if v := pisess(t, "verify", db); v.code != ExitClean {
		t.Fatalf("verify after the migration: %s", v)
	}
	// Later runs, past the fresh cache's racy window, write the tree (pi
	// appended to the JSONL session) and so remember their verdicts, the
	// sqlite session's among them (the cron steady state).
	fresh := filepath.Join(tree, ledger.PisessDir, "fresh.json")
	for i := 0; ; i++ {
		time.Sleep(2100 * time.Millisecond)
		appendEntry(t, jsonl, fmt.Sprintf("cafe%04d", i))
		if r := pisess(t, "migrate", "-q", tree); r.code != ExitClean {
			t.Fatalf("refresh of the JSONL session: %s", r)
		}
		if b, _ := os.ReadFile(fresh); strings.Contains(string(b), "s.sqlite") {
			break
		}
		if i == 3 {
			t.Fatalf("after %d runs the fresh cache holds no verdict on the sqlite session", i+1)
		}
	}

	var before unix.Stat_t
	if err := unix.Stat(db, &before); err != nil {
		t.Fatal(err)
	}
	w.add(t, 30)
	var after unix.Stat_t
	if err := unix.Stat(db, &after); err != nil {
		t.Fatal(err)
	}
	if after.Size != before.Size || after.Mtim != before.Mtim || after.Ctim != before.Ctim {
		t.Fatalf("the database file changed (size %d→%d): the entries did not stay in the -wal", before.Size, after.Size)
	}
	if fi, err := os.Stat(db + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("no -wal: %v", err)
	}

	st := pisess(t, "status", "--json", "-v", tree)
	if c := itemClass(t, st, db); c != "stale" {
		t.Errorf("status says %q with 30 committed entries in the -wal, want stale", c)
	}
	m := pisess(t, "migrate", "--json", tree)
	it := sessionItem(t, m, db)
	if it["action"] != "refresh" || it["outcome"] != "done" {
		t.Errorf("migrate: %v %v, want a refresh of the sidecar", it["action"], it["outcome"])
	}
	if v := pisess(t, "verify", db); v.code != ExitClean {
		t.Errorf("verify after migrate: %s", v)
	}
}

// TestSQLiteRefreshKeepsNoReproducibleSidecar is issue 34 §3 (bounded
// disk): the refresh of a sqlite session that pi appended rows to does not
// keep the displaced sidecar in the quarantine: it is reproducible from the
// database (the same header row, the same first rows), as a JSONL
// session's is from the bytes it still begins with.
//
// issue 34 §3: fails on 65304d8 (the reproducibility rule compares the
// session file's first bytes, which a database never keeps: every refresh
// leaves a full copy in the quarantine).
func TestSQLiteRefreshKeepsNoReproducibleSidecar(t *testing.T) {
	tree := t.TempDir()
	dir := filepath.Join(tree, "--p--")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "s.sqlite")
	w := openSQLiteWriter(t, db, true)
	w.add(t, 40)
	w.close(t)
	if r := pisess(t, "migrate", "-q", tree); r.code != ExitClean {
		t.Fatalf("migrate: %s", r)
	}
	for i := range 3 {
		w := openSQLiteWriter(t, db, true)
		w.add(t, 5)
		w.close(t)
		id := fmt.Sprintf("sqlite-refresh-%04d", i)
		m := pisess(t, "migrate", "--json", "--correlation-id", id, tree)
		if it := sessionItem(t, m, db); it["action"] != "refresh" || it["outcome"] != "done" {
			t.Fatalf("refresh %d: %v %v\n%s", i, it["action"], it["outcome"], m)
		}
		if n := regularFiles(ledger.Quarantine(tree, id)); n != 0 {
			t.Errorf("refresh %d keeps the displaced sidecar in the quarantine (%d files, %d bytes): it is reproducible from the database's rows",
				i, n, dirSize(ledger.Quarantine(tree, id)))
		}
	}
}

// appendEntry appends a message entry with id to a JSONL session, its
// parent the session's last entry, as pi appends.
func appendEntry(tb testing.TB, path, id string) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	last := lines[len(lines)-1]
	i := strings.Index(last, `"id":"`)
	if i < 0 {
		tb.Fatalf("the last line of %s has no id", path)
	}
	parent := strings.SplitN(last[i+len(`"id":"`):], `"`, 2)[0]
	appendFile(tb, path, fmt.Sprintf(`{"type":"message","id":"%s","parentId":"%s","timestamp":"2026-01-01T00:00:09.000Z","message":{"role":"user","content":"more","timestamp":9}}`+"\n", id, parent))
}
