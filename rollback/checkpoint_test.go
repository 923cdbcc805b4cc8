package rollback

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"pisess/fixtures"
	"pisess/ledger"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// checkpointStoreEntries and friends shape the store the checkpoint tests
// roll back: 12 entries, three per 1600-byte segment (four segments), and
// checkpoints after entries 2, 5 and 9, so that rolling back to checkpoint
// 2 cuts segment 2 in the middle and sets segments 3 and 4 and checkpoint
// 3 aside.
const (
	cpEntries = 12
	cpMaxSeg  = 1600
)

var cpAt = []int{2, 5, 9}

func checkpointOptions() Options {
	return Options{Clock: fixedClock, CorrelationID: testRun, MigrationID: testMigration}
}

func segmentCount(tb testing.TB, dir string) int {
	tb.Helper()
	segs, err := listSegments(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return len(segs)
}

func TestCheckpointFixtureShape(t *testing.T) {
	f := newSidecarFixture(t, cpEntries, cpAt, cpMaxSeg)
	if n := segmentCount(t, f.sidecar); n != 4 {
		t.Fatalf("fixture has %d segments, want 4 (frame size changed? adjust cpMaxSeg)", n)
	}
	if p := storeProblems(t, f.sidecar); len(p) > 0 {
		t.Fatalf("fixture store has problems: %v", p)
	}
}

// checkRolledBack asserts what a finished rollback of the fixture to
// checkpoint 2 (head 5) leaves.
func checkRolledBack(tb testing.TB, f sidecarFixture, before map[string]string, sourceSHA string) {
	tb.Helper()
	dir := f.sidecar
	if p := storeProblems(tb, dir); len(p) > 0 {
		tb.Fatalf("store has problems after the rollback: %v", p)
	}
	st, err := store.Open(dir, store.ReadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	rows, err := st.ReadIndex()
	if err != nil || len(rows) != 5 || rows[4].EntryID != entryID(5) {
		tb.Fatalf("index after rollback: %d rows (%v), want entries 1..5", len(rows), err)
	}
	m, err := st.Manifest()
	if err != nil {
		tb.Fatal(err)
	}
	if m.Head.EntrySeq != 5 || m.Counters.EntriesTotal != 5 || m.CreatedAt != wire.FormatTimestamp(fixedClock()) {
		tb.Fatalf("manifest after rollback: head %d, entries %d, createdAt %s", m.Head.EntrySeq, m.Counters.EntriesTotal, m.CreatedAt)
	}
	cps, err := st.Checkpoints()
	if err != nil || len(cps) != 2 {
		tb.Fatalf("checkpoints after rollback: %d (%v), want 2", len(cps), err)
	}
	for _, name := range []string{"tmp/" + intentName, "tmp/" + intentTmpName, "tmp/" + stageName} {
		if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			tb.Errorf("%s left behind (%v)", name, err)
		}
	}
	// Nothing was deleted: what was set aside is byte-identical to what it
	// was, and the cut tail of segment 2 is kept.
	after := fixtures.TreeDigest(tb, dir)
	for _, pair := range [][2]string{
		{"segments/0000000000000003.seg", "segments/0000000000000003.seg.bak"},
		{"segments/0000000000000004.seg", "segments/0000000000000004.seg.bak"},
		{"checkpoints/0000000000000003.json", "checkpoints/0000000000000003.json.bak"},
	} {
		if before[pair[0]] == "" || after[pair[1]] != before[pair[0]] {
			tb.Errorf("%s set aside as %s: before %q, after %q", pair[0], pair[1], before[pair[0]], after[pair[1]])
		}
	}
	seg2, _ := os.ReadFile(filepath.Join(dir, "segments/0000000000000002.seg"))
	tail, _ := os.ReadFile(filepath.Join(dir, "segments/0000000000000002.seg.tail.bak"))
	if sha256Hex(append(seg2, tail...)) != shaOf(before["segments/0000000000000002.seg"]) {
		tb.Errorf("segment 2 and its kept tail are not the segment as it was")
	}
	if s := readSourceState(tb, dir); s.State != wire.SourceDirty || s.SourceFingerprint != nil {
		tb.Errorf("source-state after rollback: %+v, want dirty", s)
	}
	if got := fixtures.SHA256File(tb, f.session); got != sourceSHA {
		tb.Errorf("the source changed")
	}
	evs, err := ledger.ReadStoreEvents(dir)
	if err != nil {
		tb.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.Phase != wire.PhaseRollback || last.Outcome != wire.OutcomeOK || last.SourcePath != "checkpoints/0000000000000002.json" ||
		last.TargetPath != absPath(dir) || last.SourceFormat != wire.FormatNativeV2 || last.TargetFormat != wire.FormatNativeV2 ||
		last.CorrelationID != testRun || last.MigrationID != testMigration ||
		last.Verification != (wire.Verification{EntryCountMatch: true, HashChainMatch: true, IndexConsistent: true}) {
		tb.Errorf("last ledger event: %+v", last)
	}
	for _, ev := range evs {
		if ev.Outcome == wire.OutcomeFatalError {
			tb.Errorf("fatal event recorded: %+v", ev)
		}
	}
}

// shaOf extracts the digest from a TreeDigest value ("<sha> <mode>").
func shaOf(d string) string {
	if len(d) < 64 {
		return ""
	}
	return d[:64]
}

func TestToCheckpointSidecar(t *testing.T) {
	f := newSidecarFixture(t, cpEntries, cpAt, cpMaxSeg)
	before := fixtures.TreeDigest(t, f.sidecar)
	src := fixtures.SHA256File(t, f.session)
	res, err := ToCheckpoint(context.Background(), f.sidecar, 2, checkpointOptions())
	if err != nil {
		t.Fatal(err)
	}
	if res.Retained != 5 || res.Dropped != 7 || !res.MarkedDirty || res.Recovered || len(res.Truncated) != 1 || len(res.SetAside) != 4 {
		t.Fatalf("result: %+v", res)
	}
	checkRolledBack(t, f, before, src)

	// The reference's order: the intent holds every member FORMAT.md §6
	// lists; check by re-running the preflight-free recovery: nothing left.
	if ok, err := FinishPending(context.Background(), f.sidecar); ok || err != nil {
		t.Fatalf("FinishPending after a finished rollback: %v, %v", ok, err)
	}
}

func TestToCheckpointTwiceUsesNextBakNames(t *testing.T) {
	f := newSidecarFixture(t, cpEntries, cpAt, cpMaxSeg)
	ctx := context.Background()
	if _, err := ToCheckpoint(ctx, f.sidecar, 3, checkpointOptions()); err != nil {
		t.Fatal(err)
	}
	opt := checkpointOptions()
	opt.MigrationID = "1b6f2d3e-4c5a-4b7d-9e8f-1a2b3c4d5e6f"
	if _, err := ToCheckpoint(ctx, f.sidecar, 1, opt); err != nil {
		t.Fatal(err)
	}
	if p := storeProblems(t, f.sidecar); len(p) > 0 {
		t.Fatalf("problems: %v", p)
	}
	// Checkpoint 3 head 9 cut segment 3 (entries 7..9 kept) and set segment
	// 4 aside; checkpoint 1 (head 2) then cut segment 1 and set 2 and 3
	// aside; segment 3's tail was kept twice, under distinct names.
	for _, name := range []string{
		"segments/0000000000000004.seg.bak", "segments/0000000000000002.seg.bak", "segments/0000000000000003.seg.bak",
		"segments/0000000000000001.seg.tail.bak", "checkpoints/0000000000000002.json.bak", "checkpoints/0000000000000003.json.bak",
	} {
		if _, err := os.Lstat(filepath.Join(f.sidecar, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestToCheckpointNotASidecar(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	buildStore(t, dir, cpEntries, cpAt, cpMaxSeg, "")
	res, err := ToCheckpoint(context.Background(), dir, 1, checkpointOptions())
	if err != nil {
		t.Fatal(err)
	}
	if res.MarkedDirty {
		t.Error("a store with no source beside it was marked dirty")
	}
	if _, err := os.Lstat(store.SourceStatePath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("source-state.json written into a plain store: %v", err)
	}
	if p := storeProblems(t, dir); len(p) > 0 {
		t.Fatalf("problems: %v", p)
	}
}

func TestToCheckpointDryRunChangesNothing(t *testing.T) {
	f := newSidecarFixture(t, cpEntries, cpAt, cpMaxSeg)
	before := fixtures.TreeDigest(t, f.tree)
	opt := checkpointOptions()
	opt.DryRun = true
	res, err := ToCheckpoint(context.Background(), f.sidecar, 2, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !res.DryRun || res.Retained != 5 || res.Dropped != 7 || len(res.Truncated) != 1 || len(res.SetAside) != 3 {
		t.Fatalf("dry run result: %+v", res)
	}
	if d := diffMaps(fixtures.TreeDigest(t, f.tree), before); d != "" {
		t.Fatalf("a dry run changed the tree:\n%s", d)
	}
}

func TestToCheckpointRefusals(t *testing.T) {
	cases := []struct {
		name   string
		seq    uint64
		damage func(tb testing.TB, f sidecarFixture)
		opt    func(*Options)
		is     error
	}{
		{name: "unknown checkpoint", seq: 7, is: ErrNoCheckpoint},
		{name: "bad correlation id", seq: 1, opt: func(o *Options) { o.CorrelationID = "no spaces" }, is: ErrBadCorrelationID},
		{name: "flipped byte in the prefix", seq: 2, damage: func(tb testing.TB, f sidecarFixture) {
			fixtures.FlipByte(tb, filepath.Join(f.sidecar, "segments/0000000000000001.seg"), 100)
		}, is: wire.ErrChecksum},
		{name: "checkpoint chain does not match", seq: 2, damage: func(tb testing.TB, f sidecarFixture) {
			p := store.CheckpointPath(f.sidecar, 2)
			b, _ := os.ReadFile(p)
			c, err := wire.ParseCheckpoint(b)
			if err != nil {
				tb.Fatal(err)
			}
			c.ChainHash = wire.ChainGenesis
			os.Chmod(p, 0o600)
			if err := os.WriteFile(p, wire.AppendCheckpoint(nil, c), 0o600); err != nil {
				tb.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newSidecarFixture(t, cpEntries, cpAt, cpMaxSeg)
			if tc.damage != nil {
				tc.damage(t, f)
			}
			before := fixtures.TreeDigest(t, f.tree)
			opt := checkpointOptions()
			if tc.opt != nil {
				tc.opt(&opt)
			}
			_, err := ToCheckpoint(context.Background(), f.sidecar, tc.seq, opt)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("error %v does not match %v", err, tc.is)
			}
			if d := diffMaps(withoutLocks(fixtures.TreeDigest(t, f.tree)), withoutLocks(before)); d != "" {
				t.Fatalf("a refused rollback changed the tree:\n%s", d)
			}
		})
	}
}

// A failure after the intent is published records rollback/fatal_error,
// leaves the intent, and the next FinishPending rolls forward to exactly
// what an uninterrupted rollback leaves.
func TestToCheckpointFailureThenFinishPending(t *testing.T) {
	ctx := context.Background()
	ref := newSidecarFixture(t, cpEntries, cpAt, cpMaxSeg)
	if _, err := ToCheckpoint(ctx, ref.sidecar, 2, checkpointOptions()); err != nil {
		t.Fatal(err)
	}
	want := comparableStore(t, ref.sidecar)

	f := newSidecarFixture(t, cpEntries, cpAt, cpMaxSeg)
	before := fixtures.TreeDigest(t, f.sidecar)
	src := fixtures.SHA256File(t, f.session)
	opt := checkpointOptions()
	opt.Ops = durable.FaultyOps(durable.FaultRule{Op: durable.FaultRename, Pattern: "0000000000000004.seg", Err: syscall.EIO})
	_, err := ToCheckpoint(ctx, f.sidecar, 2, opt)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("error %v, want EIO", err)
	}
	if _, err := os.Lstat(IntentPath(f.sidecar)); err != nil {
		t.Fatalf("the intent is gone after a failure: %v", err)
	}
	evs, _ := ledger.ReadStoreEvents(f.sidecar)
	if last := evs[len(evs)-1]; last.Outcome != wire.OutcomeFatalError || last.ErrorClass != wire.ErrorClassIOFailure || last.CorrelationID != testRun {
		t.Fatalf("last event after a failure: %+v", last)
	}
	if s := readSourceState(t, f.sidecar); s.State != wire.SourceDirty {
		t.Fatalf("the sidecar is not dirty while its rollback is pending")
	}
	ok, err := FinishPendingWith(ctx, f.sidecar, checkpointOptions())
	if !ok || err != nil {
		t.Fatalf("FinishPending: %v, %v", ok, err)
	}
	got := comparableStore(t, f.sidecar)
	// The failed attempt's fatal event stays in the ledger: evidence.
	wantEvents := want["ledger-events"]
	delete(want, "ledger-events")
	gotEvents := got["ledger-events"]
	delete(got, "ledger-events")
	if d := diffMaps(got, want); d != "" {
		t.Fatalf("recovered rollback differs from an uninterrupted one:\n%s", d)
	}
	if len(gotEvents) <= len(wantEvents) {
		t.Fatalf("ledger after recovery lacks the fatal event")
	}
	checkRolledBackAllowFatal(t, f, before, src)
	if ok, err := FinishPending(ctx, f.sidecar); ok || err != nil {
		t.Fatalf("a second FinishPending: %v, %v", ok, err)
	}
}

func checkRolledBackAllowFatal(tb testing.TB, f sidecarFixture, before map[string]string, src string) {
	tb.Helper()
	st, err := store.Open(f.sidecar, store.ReadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	m, err := st.Manifest()
	if err != nil || m.Head.EntrySeq != 5 {
		tb.Fatalf("manifest: %+v, %v", m.Head, err)
	}
	if p := storeProblems(tb, f.sidecar); len(p) > 0 {
		tb.Fatalf("problems: %v", p)
	}
	if fixtures.SHA256File(tb, f.session) != src {
		tb.Fatal("the source changed")
	}
}

func TestIntentDocument(t *testing.T) {
	// Publish an intent the way ToCheckpoint does and read it back: every
	// member of FORMAT.md §6, pretty-printed, no trailing newline.
	f := newSidecarFixture(t, cpEntries, cpAt, cpMaxSeg)
	st, _ := store.Open(f.sidecar, store.ReadOptions{})
	cp, err := findCheckpoint(st, 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := buildPlan(st, cp)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifestContext(st)
	if err != nil || m == nil {
		t.Fatal(err)
	}
	intent, err := publishIntent(f.sidecar, cp, p, testMigration, testRun, m, checkpointOptions())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(IntentPath(f.sidecar))
	if err != nil {
		t.Fatal(err)
	}
	if b[len(b)-1] == '\n' || b[0] != '{' || b[1] != '\n' {
		t.Errorf("intent is not pretty-printed without a trailing newline: %q", b[:10])
	}
	got, err := wire.ParseRollbackIntent(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, intent) || got.RetainedIndexBytes == 0 || got.Manifest.CreatedAt != wire.FormatTimestamp(fixedClock()) {
		t.Fatalf("intent read back %+v, wrote %+v", got, intent)
	}
	stage, _ := os.ReadFile(stagePath(f.sidecar))
	if uint64(len(stage)) != got.RetainedIndexBytes || sha256Hex(stage) != got.RetainedIndexSHA256 {
		t.Fatal("staged index does not match the intent")
	}
	// FinishPending finishes it.
	if ok, err := FinishPendingWith(context.Background(), f.sidecar, checkpointOptions()); !ok || err != nil {
		t.Fatalf("FinishPending: %v %v", ok, err)
	}
	if p := storeProblems(t, f.sidecar); len(p) > 0 {
		t.Fatal(p)
	}
}

func TestFinishPendingWithoutIntentTakesNoLock(t *testing.T) {
	f := newSidecarFixture(t, cpEntries, cpAt, cpMaxSeg)
	// Hold the store lock: FinishPending of a store with nothing pending
	// must not wait for it.
	l, err := durable.OS.LockFile(context.Background(), store.MutationLockPath(f.sidecar), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if ok, err := FinishPending(context.Background(), f.sidecar); ok || err != nil {
		t.Fatalf("FinishPending: %v %v", ok, err)
	}
}

func TestToCheckpointBusy(t *testing.T) {
	f := newSidecarFixture(t, cpEntries, cpAt, cpMaxSeg)
	l, err := durable.OS.LockFile(context.Background(), f.session+".lock", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	opt := checkpointOptions()
	opt.LockTimeout = 50e6
	if _, err := ToCheckpoint(context.Background(), f.sidecar, 1, opt); !errors.Is(err, durable.ErrLockTimeout) {
		t.Fatalf("error %v, want a lock timeout", err)
	}
}
