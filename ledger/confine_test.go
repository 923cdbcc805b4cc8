package ledger

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/writers/wire"
)

// forgedLine is one hand-written journal line and whether the journal must
// refuse it as forged.
type forgedLine struct {
	name   string
	line   func(tree string) string
	forged bool
}

func noteLine(session, path, q string) string {
	n := Note{CorrelationID: testCID, At: "2026-01-01T00:00:01.000Z", Session: session, Kind: NoteUpgraded,
		Path: path, QuarantinePath: q, SHA256: strings.Repeat("a", 64), NewSHA256: strings.Repeat("b", 64)}
	return string(AppendNote(nil, n))
}

func TestJournalRefusesForgedRecords(t *testing.T) {
	q := func(tree string) string { return filepath.Join(Quarantine(tree, testCID), "--p--", "s.jsonl.source") }
	cases := []forgedLine{
		{"relative, inside", func(string) string {
			return noteLine("--p--/s.jsonl", "--p--/s.jsonl", ".pisess/quarantine/"+testCID+"/--p--/s.jsonl.source")
		}, false},
		{"absolute, inside (old record)", func(tree string) string {
			return noteLine(filepath.Join(tree, "--p--/s.jsonl"), filepath.Join(tree, "--p--/s.jsonl"), q(tree))
		}, false},
		{"session outside", func(tree string) string { return noteLine("/etc/shadow", "/etc/shadow", q(tree)) }, true},
		{"quarantine outside", func(tree string) string {
			return noteLine("--p--/s.jsonl", "--p--/s.jsonl", filepath.Join(filepath.Dir(tree), "evil"))
		}, true},
		{"dotdot relative", func(string) string {
			return noteLine("--p--/../../x.jsonl", "--p--/s.jsonl", ".pisess/quarantine/"+testCID+"/x")
		}, true},
		{"dotdot absolute", func(tree string) string {
			return noteLine(tree+"/../decoy/x.jsonl", "--p--/s.jsonl", q(tree))
		}, true},
		{"sibling with tree prefix", func(tree string) string {
			return noteLine(tree+"-other/s.jsonl", "--p--/s.jsonl", q(tree))
		}, true},
		{"another tree's .pisess", func(string) string {
			return noteLine("sub/.pisess/x.jsonl", "--p--/s.jsonl", ".pisess/quarantine/"+testCID+"/x")
		}, true},
		{"quarantine of another run", func(string) string {
			return noteLine("--p--/s.jsonl", "--p--/s.jsonl", ".pisess/quarantine/other-run-0001/x")
		}, true},
		{"session in .pisess", func(string) string {
			return noteLine(".pisess/journal.jsonl", "--p--/s.jsonl", ".pisess/quarantine/"+testCID+"/x")
		}, true},
		{"the tree itself as session", func(string) string {
			return noteLine(".", "--p--/s.jsonl", ".pisess/quarantine/"+testCID+"/x")
		}, true},
		{"event target outside", func(tree string) string {
			ev := event(wire.PhaseCutoverCommit, filepath.Join(tree, "s.jsonl"), testCID)
			ev.TargetPath = "/var/lib/x.v2"
			return string(wire.AppendMigrationEvent(nil, ev))
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tree, j := newTree(t)
			os.MkdirAll(filepath.Join(tree, PisessDir), 0o700)
			if err := os.WriteFile(j.Path(), []byte(c.line(tree)), 0o600); err != nil {
				t.Fatal(err)
			}
			recs, forged, err := j.RunRecords(testCID)
			if err != nil {
				t.Fatal(err)
			}
			if c.forged {
				if len(recs) != 0 || len(forged) != 1 || forged[0].Line != 1 || forged[0].CorrelationID != testCID ||
					!strings.Contains(forged[0].Detail, "forged") {
					t.Fatalf("records %+v, forged %+v", recs, forged)
				}
				return
			}
			if len(recs) != 1 || len(forged) != 0 {
				t.Fatalf("records %+v, forged %+v", recs, forged)
			}
			n := recs[0].Note
			if n.Session != filepath.Join(tree, "--p--/s.jsonl") || n.QuarantinePath != q(tree) {
				t.Fatalf("paths not resolved in the tree: %+v", n)
			}
		})
	}
}

func TestJournalStoresTreeRelativePaths(t *testing.T) {
	tree, j := newTree(t)
	s := filepath.Join(tree, "--p--", "s.jsonl")
	if err := j.Append(EventRecord(event(wire.PhaseCutoverCommit, s, testCID))); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(j.Path())
	if strings.Contains(string(data), tree) || !strings.Contains(string(data), `"sourcePath":"--p--/s.jsonl"`) {
		t.Fatalf("journal line holds an absolute path: %s", data)
	}
	recs, err := j.Records(testCID)
	if err != nil || len(recs) != 1 || recs[0].Event.SourcePath != s || recs[0].Event.TargetPath != filepath.Join(tree, "--p--", "s.v2") {
		t.Fatalf("read back %+v %v", recs, err)
	}
	// A moved tree reads its records at the new place.
	moved := tree + "-moved"
	if err := os.Rename(tree, moved); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(moved, tree)
	j2, _ := OpenJournal(moved)
	recs, err = j2.Records(testCID)
	if err != nil || len(recs) != 1 || recs[0].Event.SourcePath != filepath.Join(moved, "--p--", "s.jsonl") {
		t.Fatalf("moved tree: %+v %v", recs, err)
	}
}

func TestJournalOversizedLineIsBadNotBuffered(t *testing.T) {
	tree, j := newTree(t)
	os.MkdirAll(filepath.Join(tree, PisessDir), 0o700)
	good := string(wire.AppendMigrationEvent(nil, event(wire.PhasePlanned, filepath.Join(tree, "a.jsonl"), testCID)))
	data := good + strings.Repeat("x", MaxJournalLine+10) + "\n" + relLine(tree, good)
	if err := os.WriteFile(j.Path(), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	var n int
	bad, err := j.Scan(func(Record) error { n++; return nil })
	if err != nil || n != 2 || len(bad) != 1 || bad[0].Line != 2 || bad[0].Forged {
		t.Fatalf("%d records, bad %+v, %v", n, bad, err)
	}
}

func relLine(tree, line string) string { return strings.ReplaceAll(line, tree+"/", "") }

// FuzzJournalScan feeds arbitrary bytes to the journal reader: it must
// never fail other than by reporting bad lines, and every record it hands
// out names only paths inside the tree.
func FuzzJournalScan(f *testing.F) {
	for _, s := range []string{
		noteLine("--p--/s.jsonl", "--p--/s.jsonl", ".pisess/quarantine/"+testCID+"/x"),
		noteLine("/etc/shadow", "/etc/shadow", "/tmp/evil"),
		noteLine("--p--/../../../etc/x", "--p--/s.jsonl", ".pisess/quarantine/"+testCID+"/x"),
		string(wire.AppendMigrationEvent(nil, event(wire.PhaseCutoverCommit, "/srv/tree/a.jsonl", testCID))),
		"{\"schema\":\"pisess.journal_note.v1\"}\n",
		"not json\n\n\r\n",
		"\xff\xfe\n",
	} {
		f.Add([]byte(s))
	}
	j := &Journal{tree: "/srv/tree", path: "/srv/tree/.pisess/journal.jsonl"}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := j.scan(bytes.NewReader(data), func(r Record) error {
			for _, m := range r.pathMembers() {
				rel, rerr := filepath.Rel(j.tree, *m.value)
				if rerr != nil || !(filepath.IsLocal(rel) || rel == ".") {
					t.Fatalf("record line %d names %s = %q outside the tree", r.Line, m.name, *m.value)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
	})
}
