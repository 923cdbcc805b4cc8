package verify

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/readers"
	"pisess/readers/discover"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// sqliteSession writes the vector's session as a sqlite_v1 database (the
// reference's schema) at <tree>/--p--/s.sqlite.
func sqliteSession(tb testing.TB, vector string) session {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures.VectorsDir(tb), vector, "source.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	tree := tb.TempDir()
	dir := filepath.Join(tree, "--p--")
	os.Mkdir(dir, 0o700)
	s := session{tree: tree, path: filepath.Join(dir, "s.sqlite"), sidecar: filepath.Join(dir, "s.v2")}
	db, err := sql.Open("sqlite", s.path)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	messages := 0
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, `{"type":"message"`) {
			messages++
		}
	}
	stmts := []string{
		"PRAGMA journal_mode = WAL",
		"CREATE TABLE pi_session_header (id TEXT PRIMARY KEY, json TEXT NOT NULL)",
		"CREATE TABLE pi_session_entries (seq INTEGER PRIMARY KEY, json TEXT NOT NULL)",
		"CREATE TABLE pi_session_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			tb.Fatal(err)
		}
	}
	exec := func(q string, args ...any) {
		if _, err := db.Exec(q, args...); err != nil {
			tb.Fatal(err)
		}
	}
	exec("INSERT INTO pi_session_header(id, json) VALUES(?, ?)", trickyID, lines[0])
	for i, l := range lines[1:] {
		exec("INSERT INTO pi_session_entries(seq, json) VALUES(?, ?)", i+1, l)
	}
	exec("INSERT INTO pi_session_meta(key, value) VALUES('message_count', ?)", messages)
	exec("INSERT INTO pi_session_meta(key, value) VALUES('name', '')")
	return s
}

func TestSQLiteSession(t *testing.T) {
	s := sqliteSession(t, "accept/tricky")
	src, err := discover.OpenSource(s.path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := store.Create(s.sidecar, store.Options{Clock: fixed})
	if err != nil {
		t.Fatal(err)
	}
	for {
		e, err := src.Next()
		if err != nil {
			break
		}
		if _, err := w.Append(e.ID, e.ParentID, e.Type, e.Payload); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.WriteManifest(src.Header().ID, string(wire.FormatSQLitev1)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	src.Close()

	src, err = discover.OpenSource(s.path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rep, err := AgainstSource(context.Background(), src, s.sidecar, Options{SourcePath: s.path})
	if err != nil || !rep.Verified() || len(rep.Findings) != 0 {
		t.Fatalf("sqlite: %v %+v %v", err, rep.Verification, rep.Findings)
	}
	// The manifest must say sqlite_v1; a JSONL expectation refuses it.
	if f := Acceptance(s.sidecar, s.path, AcceptOptions{HeaderID: trickyID, OwnerUID: -1, OwnerGID: -1}); len(f) != 0 {
		t.Fatalf("acceptance: %v", f)
	}
	if f := Acceptance(s.sidecar, s.path, AcceptOptions{HeaderID: trickyID, SourceFormat: readers.FormatJSONLv3, OwnerUID: -1, OwnerGID: -1}); !hasCode(f, CodeSourceFormat) {
		t.Fatalf("acceptance against jsonl_v3: %v", f)
	}
	st, err := Status(s.path)
	if err != nil || st.Class != ClassMigrated || st.SourceFormat != readers.FormatSQLitev1 {
		t.Fatalf("status %+v %v", st, err)
	}
}
