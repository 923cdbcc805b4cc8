package sqlitev1

import (
	"bytes"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"testing"

	"pisess/fixtures"
	"pisess/readers"
	"pisess/readers/payload"
)

const fuzzHeader = `{"type":"session","version":3,"id":"7c1d2e3f-0000-4000-8000-000000000001","timestamp":"2025-06-01T00:00:00.000Z","cwd":"/x"}`

// FuzzSQLiteEntryJSON: the fuzzed bytes, split on "\n", are the json of
// entry rows 1, 2, ... of a database with the reference's schema. Whatever
// they hold, the reader does not panic, every failure is a classified
// *readers.RefusedError, and what it accepts is well formed.
func FuzzSQLiteEntryJSON(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join(fixtures.VectorsDir(f), "*", "*", "source.jsonl"))
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil || len(b) > 32<<10 {
			continue
		}
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			f.Add(bytes.TrimSuffix(b[i+1:], []byte("\n")))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		dir := t.TempDir()
		db := filepath.Join(dir, "s.sqlite")
		d, err := sql.Open("sqlite", db)
		if err != nil {
			t.Fatal(err)
		}
		d.SetMaxOpenConns(1)
		tx := func(q string, args ...any) {
			if _, err := d.Exec(q, args...); err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range referenceSchema {
			tx(q)
		}
		tx("BEGIN")
		tx("INSERT INTO pi_session_header(id, json) VALUES(?, ?)", "7c1d2e3f-0000-4000-8000-000000000001", fuzzHeader)
		for i, row := range bytes.Split(data, []byte("\n")) {
			tx("INSERT INTO pi_session_entries(seq, json) VALUES(?, ?)", i+1, string(row))
		}
		tx("COMMIT")
		d.Close()

		s, err := OpenWith(db, Options{TempDir: dir})
		if err != nil {
			r := readers.AsRefused(err)
			if r == nil || r.Class == "" || r.Class == readers.ClassIO {
				t.Fatalf("unclassified error %T: %v", err, err)
			}
			return
		}
		defer s.Close()
		ids := map[string]bool{}
		for {
			e, err := s.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("Next after a successful Open: %v", err)
			}
			if !payload.ValidEntryID(e.ID) || ids[e.ID] || len(e.Payload) == 0 {
				t.Fatalf("bad entry %+v", e)
			}
			ids[e.ID] = true
		}
	})
}
