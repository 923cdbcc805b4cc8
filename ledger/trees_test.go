package ledger

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"pisess/writers/durable"
)

// journalRun writes a run's start and end records into tree's journal.
func journalRun(t *testing.T, tree, id string, start, end time.Time) {
	t.Helper()
	j, err := OpenJournal(tree)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, r := range []RunRecord{
		{CorrelationID: id, At: start.UTC().Format(time.RFC3339), Phase: RunStart, Command: "migrate", PID: 1},
		{CorrelationID: id, At: end.UTC().Format(time.RFC3339), Phase: RunEnd, Command: "migrate"},
	} {
		if err := j.Append(RunRecordOf(r)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunsOfTrees: Runs lists each tree's runs in the order of the roots,
// a tree without a journal with none, and stops when ctx is done.
func TestRunsOfTrees(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	journalRun(t, a, "run-a-0000", day, day.Add(time.Minute))
	journalRun(t, a, "run-b-0000", day.Add(time.Hour), day.Add(2*time.Hour))
	got, err := Runs(context.Background(), []string{a, b})
	if err != nil || len(got) != 2 || got[0].Root != a || got[1].Root != b {
		t.Fatalf("runs: %+v %v", got, err)
	}
	if len(got[0].Runs) != 2 || got[0].Runs[0].CorrelationID != "run-a-0000" || got[0].Runs[1].CorrelationID != "run-b-0000" || len(got[1].Runs) != 0 {
		t.Fatalf("runs: %+v", got)
	}
	if _, err := os.Lstat(filepath.Join(b, PisessDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Runs created %s/.pisess (%v)", b, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := Runs(ctx, []string{a}); !errors.Is(err, context.Canceled) || len(got) != 0 {
		t.Fatalf("cancelled: %+v %v", got, err)
	}
}

// TestPruneTrees: a tree without .pisess/ is listed with nothing pruned and
// nothing created in it; a tree with one is pruned (Prune).
func TestPruneTrees(t *testing.T) {
	bare, kept := t.TempDir(), t.TempDir()
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	journalRun(t, kept, "run-old-0000", day, day.Add(time.Minute))
	journalRun(t, kept, "run-new-0000", day.Add(48*time.Hour), day.Add(49*time.Hour))
	got, err := PruneTrees(context.Background(), zerolog.Nop(), PruneOptions{Ops: durable.OS}, []string{bare, kept}, day.Add(24*time.Hour))
	if err != nil || len(got) != 2 || got[0].Root != bare || got[1].Root != kept {
		t.Fatalf("prune: %+v %v", got, err)
	}
	if len(got[0].Runs) != 0 || len(got[0].Quarantine) != 0 || got[0].KeptRuns != 0 {
		t.Errorf("the bare tree: %+v", got[0])
	}
	if _, err := os.Lstat(filepath.Join(bare, PisessDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("PruneTrees created %s/.pisess (%v)", bare, err)
	}
	if len(got[1].Runs) != 1 || got[1].Runs[0] != "run-old-0000" || got[1].KeptRuns != 1 {
		t.Errorf("the tree with runs: %+v", got[1])
	}
	runs, _, err := JournalRuns(kept)
	if err != nil || len(runs) != 1 || runs[0].CorrelationID != "run-new-0000" {
		t.Errorf("runs after prune: %+v %v", runs, err)
	}
}

// TestIdentityOf: a regular file's identity is its lstat's and changes
// with a write; anything else has none.
func TestIdentityOf(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "s.jsonl")
	if err := os.WriteFile(f, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id, ok := IdentityOf(f)
	fi, err := os.Lstat(f)
	if err != nil || !ok {
		t.Fatalf("identity of a file: %v %v", ok, err)
	}
	st, _ := durable.StatOf(fi)
	if id.Dev != st.Dev || id.Ino != st.Ino || id.Size != 3 || id.MtimeNs != fi.ModTime().UnixNano() || id.CtimeNs != st.Ctime.Sec*1e9+st.Ctime.Nsec {
		t.Fatalf("identity %+v, lstat %+v", id, st)
	}
	if err := os.WriteFile(f, []byte("{}\n{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if id2, ok := IdentityOf(f); !ok || id2 == id || id2.Size != 6 {
		t.Fatalf("after a write: %+v (before %+v)", id2, id)
	}
	link := filepath.Join(dir, "l.jsonl")
	if err := os.Symlink(f, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, link, filepath.Join(dir, "missing")} {
		if id, ok := IdentityOf(p); ok {
			t.Errorf("%s has an identity: %+v", p, id)
		}
	}
}
