package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"pisess/writers/durable"
	"pisess/writers/wire"
)

const testCID = "run-0001-abcdef"

func event(phase wire.Phase, session, cid string) wire.MigrationEvent {
	ev := wire.MigrationEvent{
		MigrationID:   "0b7e3a52-1c0d-4d6e-9f3a-2b1c0d4e6f7a",
		Phase:         phase,
		At:            "2026-01-01T00:00:00.000Z",
		SourcePath:    session,
		TargetPath:    strings.TrimSuffix(session, ".jsonl") + ".v2",
		SourceFormat:  wire.FormatJSONLv3,
		TargetFormat:  wire.FormatNativeV2,
		Outcome:       wire.OutcomeOK,
		CorrelationID: cid,
	}
	if phase == wire.PhaseCompleted {
		ev.Verification = wire.Verification{EntryCountMatch: true, HashChainMatch: true, IndexConsistent: true}
	}
	return ev
}

func newStore(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "s.v2")
	for _, d := range []string{dir, filepath.Join(dir, "migrations")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

func TestAppendStoreEventWritesCodecBytes(t *testing.T) {
	dir := newStore(t)
	evs := []wire.MigrationEvent{event(wire.PhasePlanned, "/t/a.jsonl", testCID), event(wire.PhaseCompleted, "/t/a.jsonl", testCID)}
	evs[1].ErrorClass = ""
	var want []byte
	for _, ev := range evs {
		if err := AppendStoreEvent(dir, ev); err != nil {
			t.Fatal(err)
		}
		want = wire.AppendMigrationEvent(want, ev)
	}
	got, err := os.ReadFile(StoreLedgerPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("ledger bytes:\n%s\nwant:\n%s", got, want)
	}
	fi, _ := os.Stat(StoreLedgerPath(dir))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("ledger mode %v, want 0600", fi.Mode().Perm())
	}
	read, err := ReadStoreEvents(dir)
	if err != nil || len(read) != 2 || read[1] != evs[1] {
		t.Fatalf("ReadStoreEvents = %v, %v", read, err)
	}
}

// TestReplaceStoreEvents: the ledger becomes exactly the given events'
// lines, whatever it held; an event off the contract writes nothing.
func TestReplaceStoreEvents(t *testing.T) {
	dir := newStore(t)
	old := event(wire.PhaseCompleted, "/t/a.jsonl", "run-0000-older")
	if err := AppendStoreEvent(dir, old); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(StoreLedgerPath(dir))
	if err := ReplaceStoreEventsWith(durable.OS, dir, event(wire.PhasePlanned, "/t/a.jsonl", "x")); err == nil {
		t.Fatal("an invalid event was written")
	}
	if got, _ := os.ReadFile(StoreLedgerPath(dir)); !bytes.Equal(got, before) {
		t.Fatal("a refused replacement changed the ledger")
	}
	evs := []wire.MigrationEvent{event(wire.PhasePlanned, "/t/a.jsonl", testCID), event(wire.PhaseCompleted, "/t/a.jsonl", testCID)}
	if err := ReplaceStoreEventsWith(durable.OS, dir, evs...); err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, ev := range evs {
		want = wire.AppendMigrationEvent(want, ev)
	}
	if got, _ := os.ReadFile(StoreLedgerPath(dir)); !bytes.Equal(got, want) {
		t.Fatalf("ledger:\n%s\nwant:\n%s", got, want)
	}
}

func TestAppendStoreEventSyncsFileThenDirectory(t *testing.T) {
	dir := newStore(t)
	var steps []string
	ops := durable.OS
	ops.Sync = func(f *os.File) error {
		steps = append(steps, "sync "+filepath.Base(f.Name()))
		return durable.OS.Sync(f)
	}
	if err := AppendStoreEventWith(ops, dir, event(wire.PhasePlanned, "/t/a.jsonl", testCID)); err != nil {
		t.Fatal(err)
	}
	want := []string{"sync ledger.jsonl", "sync migrations"}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	steps = nil
	if err := AppendStoreEventWith(ops, dir, event(wire.PhaseCompleted, "/t/a.jsonl", testCID)); err != nil {
		t.Fatal(err)
	}
	if len(steps) == 0 || steps[0] != "sync ledger.jsonl" {
		t.Fatalf("second append steps %v: the line must be fsynced", steps)
	}
}

func TestAppendStoreEventCreatesMigrationsDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s.v2")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := AppendStoreEvent(dir, event(wire.PhasePlanned, "/t/a.jsonl", testCID)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "migrations"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("migrations/: %v %v", fi, err)
	}
}

func TestAppendStoreEventRefusesDamagedLedger(t *testing.T) {
	good := string(wire.AppendMigrationEvent(nil, event(wire.PhasePlanned, "/t/a.jsonl", testCID)))
	for _, tc := range []struct {
		name    string
		content string
		line    int64
		torn    bool
	}{
		{"torn last line", good + good[:40], 2, true},
		{"garbage line", good + "not json\n" + good, 2, false},
		{"unknown member", strings.Replace(good, `"phase"`, `"extra":1,"phase"`, 1), 1, false},
		{"bad correlation id", strings.Replace(good, testCID, "short", 1), 1, false},
		{"no newline at all", good[:len(good)-1], 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newStore(t)
			path := StoreLedgerPath(dir)
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			err := AppendStoreEvent(dir, event(wire.PhaseCompleted, "/t/a.jsonl", testCID))
			var le *LedgerError
			if !errors.As(err, &le) || le.Line != tc.line {
				t.Fatalf("err = %v, want a LedgerError at line %d", err, tc.line)
			}
			if errors.Is(err, ErrTorn) != tc.torn {
				t.Fatalf("errors.Is(err, ErrTorn) = %v, want %v", !tc.torn, tc.torn)
			}
			got, _ := os.ReadFile(path)
			if string(got) != tc.content {
				t.Fatal("a refused append changed the ledger")
			}
		})
	}
}

func TestAppendStoreEventRefusesInvalidEvent(t *testing.T) {
	dir := newStore(t)
	ev := event(wire.PhasePlanned, "/t/a.jsonl", "bad id with spaces")
	if err := AppendStoreEvent(dir, ev); err == nil {
		t.Fatal("an event breaking the contract was appended")
	}
	if _, err := os.Stat(StoreLedgerPath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused event created the ledger")
	}
}

func TestReadStoreEventsSkipsBlankAndCRLF(t *testing.T) {
	dir := newStore(t)
	line := wire.AppendMigrationEvent(nil, event(wire.PhasePlanned, "/t/a.jsonl", testCID))
	crlf := append(append([]byte{}, line[:len(line)-1]...), '\r', '\n')
	content := append(append([]byte("  \n"), crlf...), line...)
	if err := os.WriteFile(StoreLedgerPath(dir), content, 0o600); err != nil {
		t.Fatal(err)
	}
	evs, err := ReadStoreEvents(dir)
	if err != nil || len(evs) != 2 {
		t.Fatalf("ReadStoreEvents = %d events, %v", len(evs), err)
	}
}

func TestAppendStoreEventFaultLeavesNoTornLine(t *testing.T) {
	dir := newStore(t)
	ops := durable.FaultyOps(durable.FaultRule{Op: durable.FaultWrite, Pattern: "ledger.jsonl", Err: syscall.ENOSPC, Skip: 1})
	if err := AppendStoreEventWith(ops, dir, event(wire.PhasePlanned, "/t/a.jsonl", testCID)); err != nil {
		t.Fatal(err)
	}
	if err := AppendStoreEventWith(ops, dir, event(wire.PhaseCompleted, "/t/a.jsonl", testCID)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err = %v, want ENOSPC", err)
	}
	if evs, err := ReadStoreEvents(dir); err != nil || len(evs) != 1 {
		t.Fatalf("after a failed append: %d events, %v", len(evs), err)
	}
}

func note(kind NoteKind, session, cid string) Note {
	return Note{CorrelationID: cid, At: "2026-01-01T00:00:01.000Z", Session: session, Kind: kind,
		Path: strings.TrimSuffix(session, ".jsonl") + ".v2"}
}

func TestNoteRoundTrip(t *testing.T) {
	n := Note{CorrelationID: testCID, At: "2026-01-01T00:00:00.000Z", Session: "/t/a\u2028<b>.jsonl",
		Kind: NoteUpgraded, Path: "/t/a.jsonl", QuarantinePath: "/t/.pisess/quarantine/x/a.jsonl.source",
		SHA256: strings.Repeat("a", 64), NewSHA256: strings.Repeat("b", 64), Detail: "tab\there \"q\""}
	line := AppendNote(nil, n)
	want := `{"schema":"pisess.journal_note.v1","correlationId":"run-0001-abcdef","at":"2026-01-01T00:00:00.000Z",` +
		"\"session\":\"/t/a\u2028<b>.jsonl\",\"kind\":\"upgraded\",\"path\":\"/t/a.jsonl\"," +
		`"quarantinePath":"/t/.pisess/quarantine/x/a.jsonl.source","sha256":"` + strings.Repeat("a", 64) +
		`","newSha256":"` + strings.Repeat("b", 64) + `","detail":"tab\there \"q\""}` + "\n"
	if string(line) != want {
		t.Fatalf("note line:\n%s\nwant:\n%s", line, want)
	}
	got, err := ParseNote(line)
	if err != nil || got != n {
		t.Fatalf("ParseNote = %+v, %v", got, err)
	}
	minimal := AppendNote(nil, Note{CorrelationID: testCID, At: n.At, Session: "/s.jsonl", Kind: NoteRepair})
	if bytes.Contains(minimal, []byte("path")) || bytes.Contains(minimal, []byte("detail")) {
		t.Fatalf("empty optional members written: %s", minimal)
	}
	for _, bad := range []string{
		`{"schema":"pisess.journal_note.v1","correlationId":"run-0001-abcdef","at":"x","session":"/s","kind":"repair"}`,
		`{"schema":"pisess.journal_note.v1","correlationId":"run-0001-abcdef","at":"2026-01-01T00:00:00Z","session":"/s","kind":"nope"}`,
		`{"schema":"pisess.journal_note.v1","schema":"pisess.journal_note.v1","correlationId":"run-0001-abcdef","at":"2026-01-01T00:00:00Z","session":"/s","kind":"repair"}`,
		`{"schema":"pisess.journal_note.v1","correlationId":1,"at":"2026-01-01T00:00:00Z","session":"/s","kind":"repair"}`,
	} {
		if _, err := ParseNote([]byte(bad + "\n")); err == nil {
			t.Errorf("ParseNote accepted %s", bad)
		}
	}
}

func newTree(tb testing.TB) (string, *Journal) {
	tb.Helper()
	tree := tb.TempDir()
	j, err := OpenJournal(tree)
	if err != nil {
		tb.Fatal(err)
	}
	return tree, j
}

func TestJournalAppendAndRead(t *testing.T) {
	tree, j := newTree(t)
	if _, err := os.Stat(filepath.Join(tree, PisessDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("OpenJournal created .pisess/")
	}
	if recs, err := j.Records(""); err != nil || len(recs) != 0 {
		t.Fatalf("empty journal: %v %v", recs, err)
	}
	a, b := filepath.Join(tree, "a.jsonl"), filepath.Join(tree, "b.jsonl")
	other := "run-0002-abcdef"
	recs := []Record{
		EventRecord(event(wire.PhasePlanned, a, testCID)),
		EventRecord(event(wire.PhasePlanned, b, other)),
		NoteRecord(note(NoteInstalled, a, testCID)),
		EventRecord(event(wire.PhaseCompleted, a, testCID)),
		EventRecord(event(wire.PhaseCompleted, b, other)),
	}
	var want []byte
	for _, r := range recs {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
		line, _ := relativeRecord(tree, r).encode()
		want = append(want, line...)
	}
	got, _ := os.ReadFile(j.Path())
	if !bytes.Equal(got, want) {
		t.Fatalf("journal:\n%s\nwant:\n%s", got, want)
	}
	if fi, _ := os.Stat(filepath.Join(tree, PisessDir)); fi.Mode().Perm() != 0o700 {
		t.Errorf(".pisess mode %v", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(j.Path()); fi.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v", fi.Mode().Perm())
	}
	mine, err := j.Records(testCID)
	if err != nil || len(mine) != 3 {
		t.Fatalf("Records(%s) = %d, %v", testCID, len(mine), err)
	}
	if mine[0].Line != 1 || mine[1].Note == nil || mine[1].Note.Kind != NoteInstalled || mine[2].Line != 4 {
		t.Fatalf("records: %+v", mine)
	}
	ids, err := j.CorrelationIDs()
	if err != nil || fmt.Sprint(ids) != fmt.Sprint([]string{testCID, other}) {
		t.Fatalf("CorrelationIDs = %v, %v", ids, err)
	}
	if cid, ok := j.LastMigration(b); !ok || cid != other {
		t.Fatalf("LastMigration(b) = %q %v", cid, ok)
	}
	if _, ok := j.LastMigration(filepath.Join(tree, "none.jsonl")); ok {
		t.Fatal("LastMigration of an unknown session")
	}
}

func TestJournalRefusesInvalidRecords(t *testing.T) {
	tree, j := newTree(t)
	a := filepath.Join(tree, "a.jsonl")
	outside := event(wire.PhasePlanned, "/etc/passwd", testCID)
	ev := event(wire.PhasePlanned, a, testCID)
	n := note(NoteInstalled, a, testCID)
	for name, r := range map[string]Record{
		"empty":      {},
		"both":       {Event: &ev, Note: &n},
		"bad event":  EventRecord(event(wire.PhasePlanned, a, "x")),
		"bad note":   NoteRecord(Note{CorrelationID: testCID, At: "now", Session: "/s", Kind: NoteRepair}),
		"no session": NoteRecord(Note{CorrelationID: testCID, At: n.At, Kind: NoteRepair}),
		"outside":    EventRecord(outside),
		"dotdot":     NoteRecord(Note{CorrelationID: testCID, At: n.At, Kind: NoteInstalled, Session: "../x.jsonl"}),
	} {
		if err := j.Append(r); err == nil {
			t.Errorf("%s: appended", name)
		}
	}
}

// TestJournalAppendAll: records appended together land in order, each
// line as Append writes it; one record a reader would refuse keeps them
// all out.
func TestJournalAppendAll(t *testing.T) {
	tree, j := newTree(t)
	a := filepath.Join(tree, "a.jsonl")
	recs := []Record{
		EventRecord(event(wire.PhaseCutoverCommit, a, testCID)),
		NoteRecord(note(NoteInstalled, a, testCID)),
		NoteRecord(note(NoteDiscarded, a, testCID)),
	}
	if err := j.AppendAll(EventRecord(event(wire.PhasePlanned, a, testCID)), EventRecord(event(wire.PhasePlanned, "/etc/passwd", testCID))); err == nil {
		t.Fatal("a batch with a record outside the tree was appended")
	}
	if _, err := os.Stat(j.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused batch wrote the journal (%v)", err)
	}
	if err := j.AppendAll(recs...); err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, r := range recs {
		line, _ := relativeRecord(tree, r).encode()
		want = append(want, line...)
	}
	got, _ := os.ReadFile(j.Path())
	if !bytes.Equal(got, want) {
		t.Fatalf("journal:\n%s\nwant:\n%s", got, want)
	}
	if mine, err := j.Records(testCID); err != nil || len(mine) != 3 || mine[2].Note.Kind != NoteDiscarded {
		t.Fatalf("Records = %+v, %v", mine, err)
	}
}

func TestJournalReportsBadLinesAndHealsTornTail(t *testing.T) {
	tree, j := newTree(t)
	a := filepath.Join(tree, "a.jsonl")
	if err := j.Append(EventRecord(event(wire.PhasePlanned, a, testCID))); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(j.Path(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := wire.AppendMigrationEvent(nil, event(wire.PhaseCompleted, a, testCID))
	f.WriteString("{\"schema\":\"something.else\"}\nnot json\n")
	f.Write(torn[:50])
	f.Close()

	var n int
	bad, err := j.Scan(func(Record) error { n++; return nil })
	if err != nil || n != 1 || len(bad) != 3 {
		t.Fatalf("Scan: %d records, bad %v, err %v", n, bad, err)
	}
	if bad[0].Line != 2 || bad[1].Line != 3 || bad[2].Line != 4 || !strings.Contains(bad[2].Detail, "torn") {
		t.Fatalf("bad lines %+v", bad)
	}

	// The next append terminates the fragment; the new record is whole.
	if err := j.Append(EventRecord(event(wire.PhaseCompleted, a, testCID))); err != nil {
		t.Fatal(err)
	}
	recs, err := j.Records(testCID)
	if err != nil || len(recs) != 2 || recs[1].Line != 5 || recs[1].Event.Phase != wire.PhaseCompleted {
		t.Fatalf("after heal: %+v %v", recs, err)
	}
	bad, _ = j.Scan(func(Record) error { return nil })
	if len(bad) != 3 || bad[2].Line != 4 || strings.Contains(bad[2].Detail, "torn") {
		t.Fatalf("the fragment should stay as a bad line: %+v", bad)
	}
	data, _ := os.ReadFile(j.Path())
	if !bytes.Contains(data, append(torn[:50:50], '\n')) {
		t.Fatal("the torn fragment was not kept")
	}
	_ = tree
}

// A Journal remembers where its last line ended; a journal another writer
// changed since (a whole line appended, or one torn), or replaced, is
// looked at again before the next append.
func TestJournalAppendAfterAnotherWriter(t *testing.T) {
	for _, c := range []struct {
		name, extra string
		replace     bool
	}{
		{"a whole line appended", "{\"schema\":\"something.else\"}\n", false},
		{"a torn line appended", "{\"schema\":\"some", false},
		{"replaced by a torn file", "{\"schema\":\"some", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tree, j := newTree(t)
			a := filepath.Join(tree, "a.jsonl")
			if err := j.Append(EventRecord(event(wire.PhasePlanned, a, testCID))); err != nil {
				t.Fatal(err)
			}
			first, err := os.ReadFile(j.Path())
			if err != nil {
				t.Fatal(err)
			}
			if c.replace {
				// Same size as the journal was, another file.
				data := append([]byte(nil), first[:len(first)-len(c.extra)]...)
				data = append(data, c.extra...)
				if err := os.Remove(j.Path()); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(j.Path(), data, 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				f, err := os.OpenFile(j.Path(), os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteString(c.extra)
				f.Close()
			}
			if err := j.Append(EventRecord(event(wire.PhaseCompleted, a, testCID))); err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(j.Path())
			if !bytes.HasSuffix(data, []byte("\n")) || bytes.Contains(data, []byte("\n\n")) {
				t.Fatalf("journal %q", data)
			}
			recs, err := j.Records(testCID)
			if err != nil || len(recs) == 0 || recs[len(recs)-1].Event == nil || recs[len(recs)-1].Event.Phase != wire.PhaseCompleted {
				t.Fatalf("the last append is not a whole record: %+v %v", recs, err)
			}
		})
	}
}

func TestUnfinished(t *testing.T) {
	tree, j := newTree(t)
	a, b, c, d := filepath.Join(tree, "a.jsonl"), filepath.Join(tree, "b.jsonl"), filepath.Join(tree, "c.jsonl"), filepath.Join(tree, "d.jsonl")
	run2 := "run-0002-abcdef"
	failed := event(wire.PhaseFailed, c, testCID)
	failed.Outcome, failed.ErrorClass = wire.OutcomeFatalError, wire.ErrorClassIOFailure
	rolledBack := event(wire.PhaseRollback, d, testCID)
	for _, ev := range []wire.MigrationEvent{
		event(wire.PhasePlanned, a, testCID), event(wire.PhaseStagingCopy, a, testCID),
		event(wire.PhaseIntegrityCheck, a, testCID), event(wire.PhaseCutoverCommit, a, testCID),
		event(wire.PhaseCompleted, a, testCID),                                         // a: done
		event(wire.PhasePlanned, b, testCID), event(wire.PhaseStagingCopy, b, testCID), // b: died in staging
		event(wire.PhasePlanned, c, testCID), failed, // c: failed is an outcome
		event(wire.PhasePlanned, d, testCID), event(wire.PhaseCutoverCommit, d, testCID), rolledBack, // d: rolled back
		event(wire.PhaseCompleted, b, run2),     // another run's outcome does not resolve b
		event(wire.PhaseCutoverCommit, a, run2), // a in run2: died at cutover
	} {
		if err := j.Append(EventRecord(ev)); err != nil {
			t.Fatal(err)
		}
	}
	un, err := j.Unfinished()
	if err != nil {
		t.Fatal(err)
	}
	if len(un) != 2 {
		t.Fatalf("Unfinished = %v", un)
	}
	if un[0].Session != b || un[0].Phase != wire.PhaseStagingCopy || un[0].CorrelationID != testCID {
		t.Errorf("first: %+v", un[0])
	}
	if un[1].Session != a || un[1].Phase != wire.PhaseCutoverCommit || un[1].CorrelationID != run2 {
		t.Errorf("second: %+v", un[1])
	}
	if msg := un[0].Error(); !strings.Contains(msg, "pisess migrate "+b) {
		t.Errorf("pre-cutover message names no command: %s", msg)
	}
	if msg := un[1].Error(); !strings.Contains(msg, "pisess fsck --repair "+a) || !strings.Contains(msg, "pisess rollback "+run2) {
		t.Errorf("cutover message names no command: %s", msg)
	}
	var ue *UnfinishedError
	if !errors.As(error(un[0]), &ue) {
		t.Fatal("not an *UnfinishedError")
	}
}

func TestJournalConcurrentAppendsAreWholeLines(t *testing.T) {
	tree, j := newTree(t)
	const workers, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				s := filepath.Join(tree, fmt.Sprintf("%02d/%03d-%s.jsonl", w, i, strings.Repeat("x", 200)))
				var r Record
				if i%2 == 0 {
					r = EventRecord(event(wire.PhasePlanned, s, testCID))
				} else {
					r = NoteRecord(note(NoteInstalled, s, testCID))
				}
				errs <- j.Append(r)
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	bad, err := j.Scan(func(Record) error { n++; return nil })
	if err != nil || len(bad) != 0 || n != workers*each {
		t.Fatalf("%d records, bad %v, err %v", n, bad, err)
	}
}

func TestJournalGivenToTreeOwnerWhenRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	tree, j := newTree(t)
	if err := os.Chown(tree, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(NoteRecord(note(NoteRepair, filepath.Join(tree, "a.jsonl"), testCID))); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(tree, PisessDir), j.Path()} {
		uid, gid, err := durable.OS.Owner(p)
		if err != nil || uid != 65534 || gid != 65534 {
			t.Errorf("%s owned by %d:%d (%v), want 65534", p, uid, gid, err)
		}
	}
}

func TestQuarantinePaths(t *testing.T) {
	tree := "/home/u/.pi/agent/sessions"
	q := Quarantine(tree, testCID)
	if q != tree+"/.pisess/quarantine/"+testCID {
		t.Fatalf("Quarantine = %s", q)
	}
	p := QuarantinePath(tree, testCID, "--home-u-proj--/2026_ab.jsonl", "sidecar")
	if p != q+"/--home-u-proj--/2026_ab.jsonl.sidecar" {
		t.Fatalf("QuarantinePath = %s", p)
	}
	if p2 := QuarantinePath(tree, testCID, "--home-u-proj--/2026_ab.jsonl", "sidecar"); p2 != p {
		t.Fatal("not deterministic")
	}
	for _, rel := range []string{"../../etc/passwd", "/etc/passwd"} {
		p := QuarantinePath(tree, testCID, rel, "source")
		if !strings.HasPrefix(p, q+"/_nonlocal/") {
			t.Errorf("QuarantinePath(%q) = %s escapes the quarantine", rel, p)
		}
	}
	if p := QuarantinePath(tree, testCID, "a.jsonl", "x/../../y"); !strings.HasPrefix(p, q+"/") {
		t.Errorf("kind escaped: %s", p)
	}
}

func TestCorrelationIDs(t *testing.T) {
	id := NewCorrelationID()
	if !ValidCorrelationID(id) || len(id) != 36 || id[14] != '4' {
		t.Fatalf("NewCorrelationID = %q", id)
	}
	if id == NewCorrelationID() {
		t.Fatal("two equal ids")
	}
	for _, bad := range []string{"short", "has space in it", strings.Repeat("a", 129), "slash/inside"} {
		if ValidCorrelationID(bad) {
			t.Errorf("ValidCorrelationID(%q)", bad)
		}
	}
}

// TestJournalSyncOnlyWhatIsUnsynced: Sync fsyncs the journal only when an
// append left records unsynced, and SyncUnlessSealed trusts a seal of the
// journal's own filesystem (syncfs) in place of its fsync, never another's
// or a fallback seal of one tree. The fsync fails here, which shows when
// it is called.
func TestJournalSyncOnlyWhatIsUnsynced(t *testing.T) {
	tree, first := newTree(t)
	a := filepath.Join(tree, "a.jsonl")
	if err := first.Append(EventRecord(event(wire.PhasePlanned, a, testCID))); err != nil {
		t.Fatal(err)
	}
	j, err := OpenJournalWith(durable.FaultyOps(durable.FaultRule{Op: durable.FaultSync, Pattern: "journal.jsonl", Err: syscall.EIO}), tree)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Sync(); err != nil {
		t.Fatalf("Sync with nothing appended: %v", err)
	}
	if err := j.AppendAllUnsynced(EventRecord(event(wire.PhaseCutoverCommit, a, testCID)), NoteRecord(note(NoteInstalled, a, testCID))); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(j.Path(), &st); err != nil {
		t.Fatal(err)
	}
	dev := uint64(st.Dev)
	if err := j.SyncUnlessSealed(dev, true); err != nil {
		t.Fatalf("after a seal of its filesystem: %v", err)
	}
	for _, c := range []struct {
		dev   uint64
		whole bool
	}{{dev + 1, true}, {dev, false}} {
		if err := j.SyncUnlessSealed(c.dev, c.whole); !errors.Is(err, syscall.EIO) {
			t.Errorf("SyncUnlessSealed(%d, %v) = %v, want the fsync's EIO", c.dev, c.whole, err)
		}
	}
	if err := j.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("Sync after a failed one = %v, want EIO (the records are still unsynced)", err)
	}
	if mine, err := first.Records(testCID); err != nil || len(mine) != 3 {
		t.Fatalf("Records = %+v, %v", mine, err)
	}
}

// TestJournalHeldOpen: once an append has left the journal whole, the next
// ones write through the file held open (no open of the journal per
// append), what they write reads back in order, a Sync uses it, and after
// Close an append opens the journal again.
func TestJournalHeldOpen(t *testing.T) {
	tree, _ := newTree(t)
	opens := 0
	ops := durable.OS
	ops.OpenFile = func(path string, flag int, perm os.FileMode) (*os.File, error) {
		if filepath.Base(path) == JournalName {
			opens++
		}
		return durable.OS.OpenFile(path, flag, perm)
	}
	j, err := OpenJournalWith(ops, tree)
	if err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(tree, "a.jsonl")
	phases := []wire.Phase{wire.PhasePlanned, wire.PhaseStagingCopy, wire.PhaseIntegrityCheck,
		wire.PhaseCutoverCommit, wire.PhaseCompleted, wire.PhasePlanned, wire.PhaseCompleted}
	settled := 0
	for i, p := range phases {
		if err := j.AppendUnsynced(EventRecord(event(p, a, testCID))); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			settled = opens // created, then opened to be held
		}
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if opens != settled {
		t.Fatalf("%d opens of the journal after the second append, %d after the last and a Sync", settled, opens)
	}
	recs, err := j.Records(testCID)
	if err != nil || len(recs) != len(phases) {
		t.Fatalf("Records = %d, %v", len(recs), err)
	}
	for i, r := range recs {
		if r.Event == nil || r.Event.Phase != phases[i] {
			t.Fatalf("record %d: %+v, want %s", i, r, phases[i])
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(EventRecord(event(wire.PhaseCompleted, a, testCID))); err != nil {
		t.Fatal(err)
	}
	if opens == settled {
		t.Fatal("an append after Close did not open the journal")
	}
	if recs, _ := j.Records(testCID); len(recs) != len(phases)+1 {
		t.Fatalf("%d records after Close and an append", len(recs))
	}
}
