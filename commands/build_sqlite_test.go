package commands

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
)

// writeSQLiteSession turns a JSONL session into a sqlite_v1 database with
// the reference's schema (FORMAT.md §10). The "sqlite" driver is linked in
// through the sqlitev1 reader.
func writeSQLiteSession(tb testing.TB, jsonlPath, dbPath string) {
	tb.Helper()
	b, err := os.ReadFile(jsonlPath)
	if err != nil {
		tb.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	d, err := sql.Open("sqlite", dbPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer d.Close()
	d.SetMaxOpenConns(1)
	stmts := []string{
		"PRAGMA journal_mode=WAL",
		"CREATE TABLE pi_session_header (id TEXT PRIMARY KEY, json TEXT NOT NULL)",
		"CREATE TABLE pi_session_entries (seq INTEGER PRIMARY KEY, json TEXT NOT NULL)",
		"CREATE TABLE pi_session_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
	}
	for _, q := range stmts {
		if _, err := d.Exec(q); err != nil {
			tb.Fatal(err)
		}
	}
	id := strings.SplitN(strings.SplitN(lines[0], `"id":"`, 2)[1], `"`, 2)[0]
	if _, err := d.Exec("INSERT INTO pi_session_header(id, json) VALUES(?, ?)", id, lines[0]); err != nil {
		tb.Fatal(err)
	}
	for i, l := range lines[1:] {
		if _, err := d.Exec("INSERT INTO pi_session_entries(seq, json) VALUES(?, ?)", i+1, l); err != nil {
			tb.Fatal(err)
		}
	}
	for k, v := range map[string]string{"message_count": "0", "name": ""} {
		if _, err := d.Exec("INSERT INTO pi_session_meta(key, value) VALUES(?, ?)", k, v); err != nil {
			tb.Fatal(err)
		}
	}
}

// A SQLite session builds the same frames and index as its JSONL twin; only
// the manifest's sourceFormat (and so its hash) differs.
func TestBuildSQLiteSession(t *testing.T) {
	vec := filepath.Join(fixtures.VectorsDir(t), "accept", "tricky")
	t.Setenv(EnvClock, fixedClock)
	db := filepath.Join(t.TempDir(), "session.sqlite")
	writeSQLiteSession(t, filepath.Join(vec, "source.jsonl"), db)
	out := filepath.Join(t.TempDir(), "session.v2")
	r := pisess(t, "build", "--json", db, out)
	if r.code != ExitClean {
		t.Fatalf("%s", r)
	}
	obj := r.jsonObject(t)
	if obj["sourceFormat"] != "sqlite_v1" || obj["entries"] != float64(11) {
		t.Errorf("report %v", obj)
	}
	ref := filepath.Join(vec, "reference.v2")
	sameBytes(t, filepath.Join(ref, "segments", "0000000000000001.seg"), filepath.Join(out, "segments", "0000000000000001.seg"))
	sameBytes(t, filepath.Join(ref, "index", "offsets.jsonl"), filepath.Join(out, "index", "offsets.jsonl"))
	j := pisess(t, "inspect", "--json", out)
	if j.code != ExitClean {
		t.Fatalf("%s", j)
	}
	if m := j.jsonObject(t)["manifest"].(map[string]any); m["sourceFormat"] != "sqlite_v1" {
		t.Errorf("manifest sourceFormat %v", m["sourceFormat"])
	}
}
