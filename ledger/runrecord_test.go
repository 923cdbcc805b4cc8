package ledger

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"pisess/writers/wire"
)

func TestRunRecordRoundTrip(t *testing.T) {
	r := RunRecord{CorrelationID: testCID, At: "2026-01-01T00:00:00.000Z", Phase: RunEnd, Command: "fsck --repair",
		Totals: map[string]int64{"installed": 3, "failed": 0}, Interrupted: true, Healed: []string{"run-0000-dead01"}}
	line := AppendRun(nil, r)
	want := `{"schema":"pisess.journal_run.v1","correlationId":"run-0001-abcdef","at":"2026-01-01T00:00:00.000Z","phase":"end",` +
		`"command":"fsck --repair","totals":{"failed":0,"installed":3},"interrupted":true,"healed":["run-0000-dead01"]}` + "\n"
	if string(line) != want {
		t.Fatalf("line:\n%s\nwant:\n%s", line, want)
	}
	got, err := ParseRun(line)
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("parsed %+v %v, want %+v", got, err, r)
	}
	for _, bad := range []string{
		strings.Replace(want, `"phase":"end"`, `"phase":"middle"`, 1),
		strings.Replace(want, `"healed":["run-0000-dead01"]`, `"healed":["no"]`, 1),
		strings.Replace(want, `"installed":3`, `"installed":-3`, 1),
		strings.Replace(want, `"command":"fsck --repair",`, `"command":"a","command":"b",`, 1),
	} {
		if _, err := ParseRun([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// TestJournalRunRecordsAreLazy: a run's start record is written with its
// first other record, after hold; a run that appends nothing writes
// nothing, not even its end, unless forced.
func TestJournalRunRecordsAreLazy(t *testing.T) {
	tree, j := newTree(t)
	holds := 0
	start := RunRecord{CorrelationID: testCID, At: "2026-01-01T00:00:00.000Z", Phase: RunStart, Command: "migrate", PID: 7}
	end := RunRecord{CorrelationID: testCID, At: "2026-01-01T00:00:09.000Z", Phase: RunEnd, Command: "migrate"}
	j.BeginRun(start, func() error { holds++; return nil })
	if err := j.EndRun(end, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(j.Path()); !os.IsNotExist(err) || holds != 0 {
		t.Fatalf("a run that wrote nothing wrote its records (hold called %d times): %v", holds, err)
	}
	j.BeginRun(start, func() error { holds++; return nil })
	a := filepath.Join(tree, "a.jsonl")
	for range 2 {
		if err := j.Append(EventRecord(event(wire.PhasePlanned, a, testCID))); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.EndRun(end, false); err != nil {
		t.Fatal(err)
	}
	recs, err := j.Records(testCID)
	if err != nil || len(recs) != 4 || recs[0].Run == nil || recs[0].Run.Phase != RunStart || recs[3].Run == nil || recs[3].Run.Phase != RunEnd {
		t.Fatalf("records %+v %v", recs, err)
	}
	if holds != 1 {
		t.Errorf("hold called %d times, want once", holds)
	}
	// Forced: a run that took over a dead run's lock records itself.
	other := "run-0002-abcdef"
	j.BeginRun(RunRecord{CorrelationID: other, At: start.At, Phase: RunStart, Command: "migrate"}, nil)
	if err := j.EndRun(RunRecord{CorrelationID: other, At: end.At, Phase: RunEnd, Command: "migrate"}, true); err != nil {
		t.Fatal(err)
	}
	if recs, _ := j.Records(other); len(recs) != 2 {
		t.Fatalf("forced end: %+v", recs)
	}
}

// TestJournalRuns: runs are described by their run records — command,
// start and end, counts from the end's summary (a refusal journaled as a
// failed event is no failure), a rollback bracketed apart (the run keeps
// its times, shown rolled back at the rollback's end), a run that never
// ended interrupted and healed by the run whose end names it — and, in a
// journal of an older pisess, a rollback's notes are not repairs.
func TestJournalRuns(t *testing.T) {
	tree, j := newTree(t)
	a := filepath.Join(tree, "a.jsonl")
	at := func(s int) string { return "2026-01-01T00:00:0" + string(rune('0'+s)) + ".000Z" }
	ev := func(phase wire.Phase, cid string, s int) Record {
		e := event(phase, a, cid)
		e.At = at(s)
		if phase == wire.PhaseFailed {
			e.Outcome, e.ErrorClass = wire.OutcomeFatalError, wire.ErrorClassIntegrityMismatch
		}
		return EventRecord(e)
	}
	run := func(cid string, s int, phase RunPhase, command string, extra func(*RunRecord)) Record {
		r := RunRecord{CorrelationID: cid, At: at(s), Phase: phase, Command: command}
		if extra != nil {
			extra(&r)
		}
		return RunRecordOf(r)
	}
	const mig, dead, healer, old = "run-mig-00001", "run-dead-0001", "run-heal-0001", "run-old-00001"
	rollbackNote := note(NoteQuarantined, a, old)
	rollbackNote.At, rollbackNote.Detail = at(9), "rollback: the sidecar this run installed, moved aside"
	for _, r := range []Record{
		run(mig, 1, RunStart, "migrate", nil),
		ev(wire.PhasePlanned, mig, 1), ev(wire.PhaseFailed, mig, 2), ev(wire.PhaseCompleted, mig, 2),
		run(mig, 3, RunEnd, "migrate", func(r *RunRecord) { r.Totals = map[string]int64{"installed": 1, "failed": 0, "refused": 1} }),
		run(mig, 5, RunStart, "rollback", func(r *RunRecord) { r.Of = mig }),
		NoteRecord(func() Note { n := note(NoteQuarantined, a, mig); n.At = at(5); return n }()),
		ev(wire.PhaseRollback, mig, 6),
		run(mig, 6, RunEnd, "rollback", func(r *RunRecord) { r.Of = mig }),
		run(dead, 7, RunStart, "migrate", nil), ev(wire.PhasePlanned, dead, 7),
		run(healer, 8, RunStart, "migrate", nil), ev(wire.PhasePlanned, healer, 8),
		run(healer, 8, RunEnd, "migrate", func(r *RunRecord) { r.Healed = []string{dead} }),
		// An older pisess: a migrate run, then its rollback, no run records.
		ev(wire.PhasePlanned, old, 8), ev(wire.PhaseCompleted, old, 8), NoteRecord(rollbackNote), ev(wire.PhaseRollback, old, 9),
	} {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	runs, _, err := JournalRuns(tree)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]RunInfo{}
	for _, r := range runs {
		by[r.CorrelationID] = r
	}
	if r := by[mig]; r.Command != "migrate" || r.Start != at(1) || r.End != at(3) || r.Completed != 1 || r.Failed != 0 ||
		!r.RolledBack || r.RollbackAt != at(6) || r.Interrupted || r.Repairs != 0 {
		t.Errorf("the rolled-back run: %+v", r)
	}
	if r := by[dead]; !r.Interrupted || r.HealedBy != healer {
		t.Errorf("the dead run: %+v", r)
	}
	if r := by[healer]; r.Interrupted || r.HealedBy != "" {
		t.Errorf("the healing run: %+v", r)
	}
	if r := by[old]; r.Command != "migrate" || r.Repairs != 0 || r.End != at(8) || !r.RolledBack || r.Interrupted {
		t.Errorf("an older pisess's rolled-back run: %+v", r)
	}
	if got := UnendedRuns(j); !reflect.DeepEqual(got, []string{dead}) {
		t.Errorf("UnendedRuns = %v", got)
	}
}
