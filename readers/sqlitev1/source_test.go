package sqlitev1

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/readers"
)

// TestSameAsJSONL: a session stored in SQLite reads as the same session in
// JSONL does, payload for payload.
func TestSameAsJSONL(t *testing.T) {
	vectors := fixtures.VectorsDir(t)
	for _, src := range []string{
		branchingSession(t),
		filepath.Join(vectors, "accept", "tricky", "source.jsonl"),
		filepath.Join(vectors, "accept", "idless_entries", "source.jsonl"),
		filepath.Join(vectors, "accept", "header_only", "source.jsonl"),
		filepath.Join(vectors, "realpi", "01a20023-7353-71a3-8d4c-642cfca7f2ee", "source.jsonl"),
	} {
		t.Run(filepath.Base(filepath.Dir(src)), func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.sqlite")
			h, e := sessionRows(t, src)
			buildDB(t, db, h, e)
			got, err := readAll(t, db, Options{})
			if err != nil {
				t.Fatal(err)
			}
			sameEntries(t, got, jsonlEntries(t, src))
		})
	}
}

// TestLiveWriter: a writer in another process still holds the database
// open, with every commit in its un-checkpointed WAL and a read transaction
// open: the committed rows are read, and nothing beside the database is
// created or changed.
func TestLiveWriter(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.sqlite")
	startChild(t, "live", db, branchingSession(t))
	if _, err := os.Stat(db + "-wal"); err != nil {
		t.Fatalf("writer left no WAL: %v", err)
	}
	before := dirState(t, dir)
	// The database file alone holds none of the entries: they are all in
	// the WAL, which the read must see.
	alone := filepath.Join(t.TempDir(), "alone.sqlite")
	b, _ := os.ReadFile(db)
	os.WriteFile(alone, b, 0o600)
	d := openRaw(t, alone)
	var n int
	err := d.QueryRow("SELECT count(*) FROM pi_session_entries").Scan(&n)
	d.Close()
	if err == nil && n > 0 {
		t.Fatalf("the database file already holds %d entries: the WAL is not exercised", n)
	}
	readsBranchingUnchanged(t, db, before)
}

// TestHotWAL: the writer was SIGKILLed; its WAL (and -shm) stay. The
// committed rows are read; the WAL is neither checkpointed nor removed and
// the -shm is not rewritten.
func TestHotWAL(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.sqlite")
	c := startChild(t, "live", db, branchingSession(t))
	c.kill(t)
	before := dirState(t, dir)
	if !strings.Contains(before, "s.sqlite-wal") {
		t.Fatalf("no hot WAL after the kill:\n%s", before)
	}
	readsBranchingUnchanged(t, db, before)
}

// TestHotJournal: a rollback-journal writer was killed in the middle of a
// transaction that had already written into the database file. The
// committed state is read (the copy rolls the journal back); the original
// database and its hot journal are left exactly as they were.
func TestHotJournal(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.sqlite")
	c := startChild(t, "hot-journal", db, branchingSession(t))
	c.kill(t)
	before := dirState(t, dir)
	if !strings.Contains(before, "s.sqlite-journal") {
		t.Fatalf("no hot journal after the kill:\n%s", before)
	}
	// Without its journal the database file holds the uncommitted rows:
	// the rollback is what makes the read right.
	alone := filepath.Join(t.TempDir(), "alone.sqlite")
	b, _ := os.ReadFile(db)
	os.WriteFile(alone, b, 0o600)
	var n int
	d := openRaw(t, alone)
	err := d.QueryRow("SELECT count(*) FROM pi_session_entries WHERE json = 'overwritten'").Scan(&n)
	d.Close()
	if err == nil && n == 0 {
		t.Fatal("the killed transaction did not reach the database file")
	}
	readsBranchingUnchanged(t, db, before)
}

// TestReadOnlyDir: in a 0555 directory, with a hot WAL and with a cleanly
// closed WAL database. The suite runs as root, whom 0555 does not stop, so
// the proof is the directory listing: nothing created, nothing changed.
func TestReadOnlyDir(t *testing.T) {
	for _, name := range []string{"hot-wal", "closed"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "s.sqlite")
			if name == "hot-wal" {
				startChild(t, "live", db, branchingSession(t)).kill(t)
			} else {
				h, e := sessionRows(t, branchingSession(t))
				buildDB(t, db, h, e)
			}
			if err := os.Chmod(dir, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o700) })
			before := dirState(t, dir)
			readsBranchingUnchanged(t, db, before)
			if name == "closed" && strings.Contains(before, "-wal") {
				t.Fatalf("clean close left a WAL:\n%s", before)
			}
		})
	}
}

// TestLocked: a writer holding an exclusive lock makes Open wait, then
// refuse with ClassLocked. In WAL mode BEGIN EXCLUSIVE does not lock
// readers out: the committed state is read, without the uncommitted row.
func TestLocked(t *testing.T) {
	for _, mode := range []string{"excl-delete", "excl-wal"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "s.sqlite")
			startChild(t, mode, db, branchingSession(t))
			before := dirState(t, dir)
			start := time.Now()
			_, err := readAll(t, db, Options{BusyTimeout: 300 * time.Millisecond})
			mustRefuse(t, err, readers.ClassLocked, 0, "exclusive lock")
			if d := time.Since(start); d < 300*time.Millisecond {
				t.Errorf("refused after %v, before the busy timeout", d)
			}
			if after := dirState(t, dir); after != before {
				t.Fatalf("directory changed:\n%s\n->\n%s", before, after)
			}
		})
	}
	t.Run("begin-wal", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "s.sqlite")
		startChild(t, "begin-wal", db, branchingSession(t))
		got, err := readAll(t, db, Options{BusyTimeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		sameEntries(t, got, jsonlEntries(t, branchingSession(t)))
	})
}

// TestRefusals: one database per problem, each refused with its class.
func TestRefusals(t *testing.T) {
	header, lines, err := splitSession(branchingSession(t))
	if err != nil {
		t.Fatal(err)
	}
	id := headerID(header)
	good := map[int64]string{}
	for i, l := range lines {
		good[int64(i+1)] = l
	}
	with := func(edit func(m map[int64]string)) map[int64]string {
		m := map[int64]string{}
		for k, v := range good {
			m[k] = v
		}
		edit(m)
		return m
	}
	v2Header := strings.Replace(header, `"version":3`, `"version":2`, 1)
	cases := []struct {
		name    string
		headers [][2]string
		entries map[int64]string
		class   readers.Class
		line    int64
		reason  string
	}{
		{"seq gap", [][2]string{{id, header}}, with(func(m map[int64]string) { m[40] = m[3]; delete(m, 3) }),
			readers.ClassBadSequence, 4, "expected=3 actual=4"},
		{"seq from 2", [][2]string{{id, header}}, with(func(m map[int64]string) { m[int64(len(lines)+1)] = m[1]; delete(m, 1) }),
			readers.ClassBadSequence, 2, "expected=1 actual=2"},
		{"two header rows", [][2]string{{id, header}, {"zzz", header}}, good, readers.ClassBadHeader, 0, "multiple header rows"},
		{"no header row", nil, good, readers.ClassBadHeader, 0, "missing header row"},
		{"mismatched id", [][2]string{{"other", header}}, good, readers.ClassBadHeader, 0, "does not match"},
		{"version 2", [][2]string{{id, v2Header}}, good, readers.ClassUnsupportedVer, 0, "version must be 3, got 2"},
		{"header not json", [][2]string{{id, "{"}}, good, readers.ClassBadHeader, 0, "EOF while parsing an object at line 1 column 1"},
		{"bad entry", [][2]string{{id, header}}, with(func(m map[int64]string) { m[5] = `{"type":"custom_message"}` }),
			readers.ClassUnknownType, 5, "unknown variant `custom_message`"},
		{"missing parent", [][2]string{{id, header}}, with(func(m map[int64]string) {
			delete(m, int64(len(lines)))
			m[1] = strings.Replace(m[1], `"parentId":null`, `"parentId":"deadbeef"`, 1)
		}),
			readers.ClassMissingParent, 1, "references missing parent deadbeef"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.sqlite")
			buildDB(t, db, c.headers, c.entries)
			_, err := readAll(t, db, Options{})
			r := mustRefuse(t, err, c.class, c.line, c.reason)
			t.Log(r)
		})
	}
}

// TestBadFiles: files that are no SQLite session at all.
func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	random := filepath.Join(dir, "random.sqlite")
	junk := make([]byte, 64<<10)
	rand.Read(junk)
	os.WriteFile(random, junk, 0o600)
	_, err := readAll(t, random, Options{})
	mustRefuse(t, err, readers.ClassCorrupt, 0, "Invalid SQLite database header")

	empty := filepath.Join(dir, "empty.sqlite")
	os.WriteFile(empty, nil, 0o600)
	_, err = readAll(t, empty, Options{})
	mustRefuse(t, err, readers.ClassEmptyFile, 0)

	// A real database whose pages after the header are overwritten.
	damaged := filepath.Join(dir, "damaged.sqlite")
	h, e := sessionRows(t, branchingSession(t))
	buildDB(t, damaged, h, e)
	b, _ := os.ReadFile(damaged)
	rand.Read(b[4096:])
	os.WriteFile(damaged, b, 0o600)
	_, err = readAll(t, damaged, Options{})
	mustRefuse(t, err, readers.ClassCorrupt, 0)

	link := filepath.Join(dir, "link.sqlite")
	os.Symlink(damaged, link)
	_, err = readAll(t, link, Options{})
	mustRefuse(t, err, readers.ClassSymlink, 0)

	other := filepath.Join(dir, "other.sqlite")
	buildDB(t, other, nil, nil)
	d := openRaw(t, other)
	d.Exec("DROP TABLE pi_session_entries")
	d.Close()
	_, err = readAll(t, other, Options{})
	mustRefuse(t, err, readers.ClassBadSchema, 0, "no table pi_session_entries")
}

// TestNoTempLeft: Close removes the private copy.
func TestNoTempLeft(t *testing.T) {
	tmp := t.TempDir()
	db := filepath.Join(t.TempDir(), "s.sqlite")
	h, e := sessionRows(t, branchingSession(t))
	buildDB(t, db, h, e)
	if _, err := readAll(t, db, Options{TempDir: tmp}); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.sqlite")
	buildDB(t, bad, nil, e)
	if _, err := readAll(t, bad, Options{TempDir: tmp}); err == nil {
		t.Fatal("no header row accepted")
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Fatalf("left in the temp dir: %v", ents)
	}
}
