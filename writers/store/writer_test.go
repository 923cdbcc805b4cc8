package store

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"pisess/writers/durable"
	"pisess/writers/wire"
)

const testSession = "3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b"

func payloadFor(id, parent string) []byte {
	p := `{"customType":"t","data":{"n":1},"id":"` + id + `"`
	if parent != "" {
		p += `,"parentId":"` + parent + `"`
	}
	return []byte(p + `,"timestamp":"2026-01-05T10:00:00.000Z","type":"custom"}`)
}

func newWriter(tb testing.TB, opt Options) (*Writer, string) {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "s.v2")
	if opt.Clock == nil {
		opt.Clock = fixedClock
	}
	w, err := Create(dir, opt)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { w.Close() })
	return w, dir
}

func mode(tb testing.TB, path string) os.FileMode {
	tb.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return st.Mode().Perm()
}

// Modes are 0700/0600 whatever the umask, and the layout is complete.
func TestCreateLayoutAndModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	w, dir := newWriter(t, Options{})
	if _, err := w.Append("a1", "", "custom", payloadFor("a1", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteManifest(testSession, "jsonl_v3"); err != nil {
		t.Fatal(err)
	}
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	for _, d := range append([]string{""}, StoreDirs...) {
		if m := mode(t, filepath.Join(dir, d)); m != 0o700 {
			t.Errorf("%s: mode %o", d, m)
		}
	}
	for _, f := range []string{MutationLockPath(dir), ManifestPath(dir), IndexPath(dir), SegmentPath(dir, 1)} {
		if m := mode(t, f); m != 0o600 {
			t.Errorf("%s: mode %o", f, m)
		}
	}
	if st, _ := os.Stat(MutationLockPath(dir)); st.Size() != 0 {
		t.Error("lock file not empty")
	}
	if ps := mustOpen(t, dir).Check(); len(ps) != 0 {
		t.Fatal(ps)
	}
}

func TestCreateRefuses(t *testing.T) {
	tmp := t.TempDir()
	nonEmpty := filepath.Join(tmp, "full")
	os.MkdirAll(nonEmpty, 0o700)
	os.WriteFile(filepath.Join(nonEmpty, "x"), nil, 0o600)
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, nil, 0o600)
	realDir := filepath.Join(tmp, "real")
	os.MkdirAll(realDir, 0o700)
	link := filepath.Join(tmp, "link")
	os.Symlink(realDir, link)
	cases := map[string]struct {
		dir string
		opt Options
	}{
		"non-empty dir":          {nonEmpty, Options{}},
		"a file":                 {file, Options{}},
		"a symlink":              {link, Options{}},
		"under a symlink":        {filepath.Join(link, "s.v2"), Options{}},
		"segments over 64 MiB":   {filepath.Join(tmp, "big"), Options{MaxSegmentBytes: 64<<20 + 1}},
		"negative segment limit": {filepath.Join(tmp, "neg"), Options{MaxSegmentBytes: -1}},
	}
	for name, c := range cases {
		if _, err := Create(c.dir, c.opt); err == nil {
			t.Errorf("%s: created", name)
		}
	}
	// An existing empty directory is fine, and made private.
	empty := filepath.Join(tmp, "empty")
	os.MkdirAll(empty, 0o755)
	w, err := Create(empty, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if m := mode(t, empty); m != 0o700 {
		t.Fatalf("mode %o", m)
	}
}

// Rollover compares the first encoding's length (FORMAT.md §2): the tenth
// frame is two bytes longer than the ninth (frameSeq and entrySeq gain a
// digit), so a limit one byte short of it rolls over even though the
// rolled-over encoding (frameSeq 1) would have fitted.
func TestRolloverUsesTheFirstEncoding(t *testing.T) {
	id := func(i int) string { return fmt.Sprintf("e%07d", i) }
	lineLen := func(i int) int {
		f := wire.Frame{SegmentSeq: 1, FrameSeq: uint64(i), EntrySeq: uint64(i), EntryID: id(i), EntryType: wire.EntryCustom, Timestamp: wire.FormatTimestamp(fixedClock())}
		f.SetPayload(payloadFor(id(i), ""))
		return len(wire.AppendFrame(nil, f))
	}
	nine := 0
	for i := 1; i <= 9; i++ {
		nine += lineLen(i)
	}
	for _, tc := range []struct {
		max     int64
		wantSeg uint64
	}{
		{int64(nine + lineLen(10) - 1), 2},
		{int64(nine + lineLen(10)), 1},
	} {
		w, _ := newWriter(t, Options{MaxSegmentBytes: tc.max})
		var row wire.IndexRow
		for i := 1; i <= 10; i++ {
			var err error
			if row, err = w.Append(id(i), "", "custom", payloadFor(id(i), "")); err != nil {
				t.Fatal(err)
			}
		}
		if row.SegmentSeq != tc.wantSeg {
			t.Fatalf("max %d: tenth frame in segment %d, want %d", tc.max, row.SegmentSeq, tc.wantSeg)
		}
		if tc.wantSeg == 2 && (row.FrameSeq != 1 || row.ByteOffset != 0 || row.EntrySeq != 10) {
			t.Fatalf("rolled-over row %+v", row)
		}
	}
}

func TestAppendRefusals(t *testing.T) {
	w, dir := newWriter(t, Options{MaxSegmentBytes: 1024})
	if _, err := w.Append("a1", "", "custom", payloadFor("a1", "")); err != nil {
		t.Fatal(err)
	}
	big := payloadFor("b1", "a1")
	big = append(big[:len(big)-1], []byte(`,"pad":"`+strings.Repeat("x", 1024)+`"}`)...)
	for name, args := range map[string][4]string{
		"frame over the segment limit": {"b1", "a1", "custom", string(big)},
		"bad id":                       {"a b", "", "custom", "{}"},
		"bad parent":                   {"b2", "a/b", "custom", "{}"},
		"unknown type":                 {"b3", "", "custom_message", "{}"},
		"duplicate id":                 {"a1", "", "custom", "{}"},
		"payload not an object":        {"b4", "", "custom", "[]"},
	} {
		if _, err := w.Append(args[0], args[1], args[2], []byte(args[3])); err == nil {
			t.Errorf("%s: appended", name)
		}
	}
	// Refusals leave the store as it was, and the writer usable.
	if _, err := w.Append("b5", "a1", "custom", payloadFor("b5", "a1")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteManifest(testSession, "jsonl_v3"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if n := entryCount(t, dir); n != 2 {
		t.Fatalf("%d entries", n)
	}
}

// The 100 MiB frame limit holds whatever the segment limit.
func TestAppendRefusesFramesOver100MiB(t *testing.T) {
	w, _ := newWriter(t, Options{})
	p := make([]byte, wire.MaxFrameBytes)
	copy(p, `{"x":"`)
	for i := 6; i < len(p)-2; i++ {
		p[i] = 'a'
	}
	copy(p[len(p)-2:], `"}`)
	if _, err := w.Append("a1", "", "custom", p); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%v", err)
	}
}

func TestEmptyStoreHasNoIndexOrSegment(t *testing.T) {
	w, dir := newWriter(t, Options{})
	m, err := w.WriteManifest(testSession, "jsonl_v3")
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if m.Head != (wire.Head{}) || m.Integrity.ChainHash != wire.ChainGenesis || m.Integrity.LastCRC32C != wire.EmptyCRC32C || m.Files.SegmentCount != 0 {
		t.Fatalf("%+v", m)
	}
	if got := filesUnder(t, dir); len(got) != 2 {
		t.Fatalf("files %v", got)
	}
	if ps := mustOpen(t, dir).Check(); len(ps) != 0 {
		t.Fatal(ps)
	}
}

func TestWriteManifestRefusesFalseInvariants(t *testing.T) {
	for name, entries := range map[string][][2]string{
		"missing parent": {{"a1", ""}, {"b1", "zz"}},
		"parent cycle":   {{"a1", "b1"}, {"b1", "a1"}},
		"self parent":    {{"a1", "a1"}},
	} {
		w, dir := newWriter(t, Options{})
		for _, e := range entries {
			if _, err := w.Append(e[0], e[1], "custom", payloadFor(e[0], e[1])); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.WriteManifest(testSession, "jsonl_v3"); err == nil || !strings.Contains(err.Error(), "would be false") {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := os.Stat(ManifestPath(dir)); err == nil {
			t.Errorf("%s: a manifest was written", name)
		}
	}
}

func TestWriteManifestSessionIDForms(t *testing.T) {
	for id, ok := range map[string]bool{
		"3F2B8C1E-9A4D-4E6F-8B2A-1C5D7E9F0A1B":          true,
		"3f2b8c1e9a4d4e6f8b2a1c5d7e9f0a1b":              true,
		"{3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b}":        true,
		"urn:uuid:3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b": true,
		"my-custom-session-id":                          false,
		"URN:UUID:3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b": false,
		"3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1":           false,
	} {
		w, _ := newWriter(t, Options{})
		m, err := w.WriteManifest(id, "jsonl_v3")
		if (err == nil) != ok {
			t.Errorf("%q: %v", id, err)
		}
		if ok && m.SessionID != id {
			t.Errorf("%q written as %q", id, m.SessionID)
		}
	}
	w, _ := newWriter(t, Options{})
	if _, err := w.WriteManifest(testSession, "jsonl"); err == nil {
		t.Error("bad format accepted")
	}
}

func TestWriteManifestKeepsCreatedAt(t *testing.T) {
	now := fixedClock()
	clock := func() time.Time { now = now.Add(time.Second); return now }
	w, dir := newWriter(t, Options{Clock: clock})
	m1, err := w.WriteManifest(testSession, "jsonl_v3")
	if err != nil {
		t.Fatal(err)
	}
	if m1.CreatedAt != m1.UpdatedAt {
		t.Fatalf("%+v", m1)
	}
	w.Append("a1", "", "message", payloadFor("a1", ""))
	m2, err := w.WriteManifest(testSession, "jsonl_v3")
	if err != nil {
		t.Fatal(err)
	}
	if m2.CreatedAt != m1.CreatedAt || m2.UpdatedAt == m1.UpdatedAt || m2.Counters.MessagesTotal != 1 {
		t.Fatalf("%+v", m2)
	}
	if _, err := os.Stat(filepath.Join(TmpPath(dir), "manifest.json.tmp")); err == nil {
		t.Fatal("temp left behind")
	}
}

func TestAppendLedger(t *testing.T) {
	w, dir := newWriter(t, Options{})
	ev := testEvent()
	if err := w.AppendLedger(ev); err != nil {
		t.Fatal(err)
	}
	ev.Phase, ev.Outcome, ev.ErrorClass = wire.PhaseFailed, wire.OutcomeFatalError, wire.ErrorClassIOFailure
	if err := w.AppendLedger(ev); err != nil {
		t.Fatal(err)
	}
	evs, err := mustOpen(t, dir).Ledger()
	if err != nil || len(evs) != 2 || evs[0].At != "2026-01-01T00:00:00.000Z" || evs[1].ErrorClass != wire.ErrorClassIOFailure {
		t.Fatalf("%+v %v", evs, err)
	}
	if m := mode(t, LedgerPath(dir)); m != 0o600 {
		t.Fatalf("mode %o", m)
	}
	bad := ev
	bad.CorrelationID = "short"
	if err := w.AppendLedger(bad); err == nil {
		t.Fatal("invalid event appended")
	}
	// A torn last line is never appended to.
	appendBytes(t, LedgerPath(dir), []byte(`{"schema":`))
	before, _ := os.ReadFile(LedgerPath(dir))
	if err := w.AppendLedger(ev); !errors.Is(err, ErrTornTail) {
		t.Fatalf("%v", err)
	}
	after, _ := os.ReadFile(LedgerPath(dir))
	if !bytes.Equal(before, after) {
		t.Fatal("ledger changed")
	}
}

func TestWriteSourceState(t *testing.T) {
	w, dir := newWriter(t, Options{})
	clean := wire.SourceState{State: wire.SourceClean, SourceFingerprint: &wire.SourceFingerprint{
		ByteLength: 123, SHA256: strings.Repeat("ab", 32),
		FileIdentity: &wire.FileIdentity{Device: 2049, Inode: 77, ChangeTimeSeconds: 1767225600, ChangeTimeNanoseconds: 5},
	}}
	if err := w.WriteSourceState(clean); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSourceState(wire.SourceState{State: wire.SourceDirty}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(SourceStatePath(dir))
	if string(b) != `{"schema":"pi.session_store_v2.source_state.v1","state":"dirty"}`+"\n" {
		t.Fatalf("%s", b)
	}
	if m := mode(t, SourceStatePath(dir)); m != 0o600 {
		t.Fatalf("mode %o", m)
	}
	if err := w.WriteSourceState(wire.SourceState{State: "stale"}); err == nil {
		t.Fatal("bad state written")
	}
}

func TestWriteCheckpoint(t *testing.T) {
	w, dir := newWriter(t, Options{})
	if _, err := w.WriteCheckpoint(wire.ReasonManual); err == nil {
		t.Fatal("checkpoint of an empty store")
	}
	w.Append("a1", "", "custom", payloadFor("a1", ""))
	c1, err := w.WriteCheckpoint(wire.ReasonManual)
	if err != nil || c1.CheckpointSeq != 1 || c1.HeadEntrySeq != 1 || c1.ChainHash != w.ChainHash() {
		t.Fatalf("%+v %v", c1, err)
	}
	w.Append("b1", "a1", "custom", payloadFor("b1", "a1"))
	// A checkpoint already there with a higher number is built upon, never replaced.
	planted := c1
	planted.CheckpointSeq, planted.SnapshotRef = 5, wire.SnapshotRef(5)
	os.WriteFile(CheckpointPath(dir, 5), wire.AppendCheckpoint(nil, planted), 0o600)
	c6, err := w.WriteCheckpoint(wire.ReasonPeriodic)
	if err != nil || c6.CheckpointSeq != 6 || c6.HeadEntrySeq != 2 {
		t.Fatalf("%+v %v", c6, err)
	}
	got, err := mustOpen(t, dir).Checkpoints()
	if err != nil || len(got) != 3 || got[2] != c6 {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := w.WriteCheckpoint("sometimes"); err == nil {
		t.Fatal("bad reason")
	}
	if _, err := w.WriteManifest(testSession, "jsonl_v3"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if ps := mustOpen(t, dir).Check(); len(ps) != 0 {
		t.Fatal(ps)
	}
}

// Seal fsyncs every file and directory, each directory after its contents
// and the root last (the order is what a crash test can prove).
func TestSealSyncsTheWholeTree(t *testing.T) {
	var synced []string
	ops := durable.OS
	ops.Sync = func(f *os.File) error {
		synced = append(synced, f.Name())
		return durable.OS.Sync(f)
	}
	w, dir := newWriter(t, Options{Ops: ops})
	w.Append("a1", "", "custom", payloadFor("a1", ""))
	w.WriteManifest(testSession, "jsonl_v3")
	synced = nil
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, p := range synced {
		pos[p] = i
	}
	for _, p := range []string{SegmentPath(dir, 1), IndexPath(dir), ManifestPath(dir), MutationLockPath(dir), SegmentsPath(dir), TmpPath(dir), dir} {
		if _, ok := pos[p]; !ok {
			t.Fatalf("%s not synced: %v", p, synced)
		}
	}
	if pos[SegmentPath(dir, 1)] > pos[SegmentsPath(dir)] || pos[dir] != len(synced)-1 {
		t.Fatalf("order %v", synced)
	}
}

// A failed write poisons the writer: the staging store must be discarded.
func TestWriteFaultIsSticky(t *testing.T) {
	ops := durable.FaultyOps(durable.FaultRule{Op: durable.FaultWrite, Pattern: "*.seg", Err: syscall.ENOSPC})
	w, _ := newWriter(t, Options{Ops: ops})
	var err error
	for i := 0; i < 5000 && err == nil; i++ {
		id := fmt.Sprintf("e%d", i)
		_, err = w.Append(id, "", "custom", payloadFor(id, ""))
		if err == nil {
			err = w.Seal()
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("%v", err)
	}
	if _, err := w.Append("z1", "", "custom", payloadFor("z1", "")); err == nil {
		t.Fatal("append after a failed write")
	}
	if _, err := w.WriteManifest(testSession, "jsonl_v3"); err == nil {
		t.Fatal("manifest after a failed write")
	}
}

// TestOnceManifest: a store opened with OnceManifest answers every Manifest
// call with the first read (one look at one state of the store); without
// it, each call reads the file again.
func TestOnceManifest(t *testing.T) {
	w, dir := newWriter(t, Options{})
	if _, err := w.Append("a1", "", "custom", payloadFor("a1", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteManifest(testSession, "jsonl_v3"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	once, err := Open(dir, ReadOptions{OnceManifest: true})
	if err != nil {
		t.Fatal(err)
	}
	again := mustOpen(t, dir)
	first, err := once.Manifest()
	if err != nil || first.Counters.EntriesTotal != 1 {
		t.Fatalf("manifest %+v, %v", first.Counters, err)
	}
	if err := os.Remove(ManifestPath(dir)); err != nil {
		t.Fatal(err)
	}
	if m, err := once.Manifest(); err != nil || m.Counters != first.Counters {
		t.Fatalf("OnceManifest read the file again: %+v, %v", m.Counters, err)
	}
	if _, err := again.Manifest(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a plain store answered from a read before the removal: %v", err)
	}
}
