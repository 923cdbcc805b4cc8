package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"pisess/writers/durable"
	"pisess/writers/wire"
)

// goodStore builds a multi-segment store (the rollover vector's frames at
// 4096 bytes a segment) with a checkpoint and a ledger event, sealed and
// closed, and checks that it is clean.
func goodStore(tb testing.TB) string {
	tb.Helper()
	vc := vectorCase{}
	for _, c := range vectorCases(tb) {
		if c.name == "accept/rollover" {
			vc = c
		}
	}
	frames := referenceFrames(tb, vc.reference)
	dir := filepath.Join(tb.TempDir(), "s.v2")
	w, err := Create(dir, Options{MaxSegmentBytes: 4096, Clock: fixedClock})
	if err != nil {
		tb.Fatal(err)
	}
	for i, f := range frames {
		if _, err := w.Append(f.EntryID, f.ParentEntryID, string(f.EntryType), f.Payload); err != nil {
			tb.Fatal(err)
		}
		if i == len(frames)/2 {
			if _, err := w.WriteCheckpoint(wire.ReasonManual); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if _, err := w.WriteManifest(sessionID(tb, vc.dir), "jsonl_v3"); err != nil {
		tb.Fatal(err)
	}
	if err := w.AppendLedger(testEvent()); err != nil {
		tb.Fatal(err)
	}
	if err := w.Seal(); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	if p := mustOpen(tb, dir).Check(); len(p) != 0 {
		tb.Fatalf("the good store has problems: %v", p)
	}
	return dir
}

func testEvent() wire.MigrationEvent {
	return wire.MigrationEvent{
		MigrationID: "0b6ee6a0-3f37-4d6c-9a52-6e1c9f8e2b11", Phase: wire.PhaseCompleted,
		SourcePath: "/home/u/.pi/agent/sessions/--x--/s.jsonl", TargetPath: "/home/u/.pi/agent/sessions/--x--/s.v2",
		SourceFormat: wire.FormatJSONLv3, TargetFormat: wire.FormatNativeV2,
		Verification: wire.Verification{EntryCountMatch: true, HashChainMatch: true, IndexConsistent: true},
		Outcome:      wire.OutcomeOK, CorrelationID: "run-2026-01-01.0001",
	}
}

func indexRows(tb testing.TB, dir string) []wire.IndexRow {
	tb.Helper()
	rows, err := mustOpen(tb, dir).ReadIndex()
	if err != nil {
		tb.Fatal(err)
	}
	return rows
}

// rewriteIndex applies edit to every row and writes the index back.
func rewriteIndex(tb testing.TB, dir string, edit func(i int, r *wire.IndexRow)) {
	tb.Helper()
	var out []byte
	for i, r := range indexRows(tb, dir) {
		edit(i, &r)
		out = wire.AppendIndexRow(out, r)
	}
	if err := os.WriteFile(IndexPath(dir), out, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// middleRow returns the index of a row that is neither the last of the
// index nor the last of its segment.
func middleRow(tb testing.TB, rows []wire.IndexRow) int {
	tb.Helper()
	for i := len(rows) / 2; i < len(rows)-1; i++ {
		if rows[i+1].SegmentSeq == rows[i].SegmentSeq {
			return i
		}
	}
	tb.Fatal("no middle row")
	return 0
}

func lastSegment(tb testing.TB, dir string) string {
	tb.Helper()
	rows := indexRows(tb, dir)
	return SegmentPath(dir, rows[len(rows)-1].SegmentSeq)
}

func appendBytes(tb testing.TB, path string, b []byte) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		tb.Fatal(err)
	}
	f.Close()
}

func editFile(tb testing.TB, path string, edit func([]byte) []byte) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, edit(b), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// rewriteManifest edits the manifest document and re-signs it, so that
// only the edit is wrong.
func rewriteManifest(tb testing.TB, dir string, edit func(*wire.Manifest)) {
	tb.Helper()
	m, err := mustOpen(tb, dir).Manifest()
	if err != nil {
		tb.Fatal(err)
	}
	edit(&m)
	m.Integrity.ManifestHash = wire.ManifestHash(m)
	if err := os.WriteFile(ManifestPath(dir), wire.AppendManifest(nil, m), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// The damage table (STYLE.md §6): each damage of a copy of a good store
// yields problems of exactly one class.
func TestCheckDamageTable(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   Class
	}{
		{"torn last frame", func(t *testing.T, dir string) {
			seg := lastSegment(t, dir)
			st, _ := os.Stat(seg)
			os.Truncate(seg, st.Size()-10)
		}, ClassTornTail},
		{"zero-filled tail", func(t *testing.T, dir string) {
			appendBytes(t, lastSegment(t, dir), make([]byte, 512))
		}, ClassTornTail},
		{"unterminated bytes after the last frame", func(t *testing.T, dir string) {
			appendBytes(t, lastSegment(t, dir), []byte(`{"schema":"pi.session_store_v2.segment_fr`))
		}, ClassTornTail},
		{"flipped payload byte", func(t *testing.T, dir string) {
			rows := indexRows(t, dir)
			r := rows[middleRow(t, rows)]
			editFile(t, SegmentPath(dir, r.SegmentSeq), func(b []byte) []byte {
				b[r.End()-20] ^= 0x01
				return b
			})
		}, ClassCRCMismatch},
		{"wrong CRC in index", func(t *testing.T, dir string) {
			m := middleRow(t, indexRows(t, dir))
			rewriteIndex(t, dir, func(i int, r *wire.IndexRow) {
				if i == m {
					r.CRC32C = "0BADC0DE"
				}
			})
		}, ClassCRCMismatch},
		{"index row out of bounds", func(t *testing.T, dir string) {
			m := middleRow(t, indexRows(t, dir))
			rewriteIndex(t, dir, func(i int, r *wire.IndexRow) {
				if i == m {
					r.ByteOffset = 1 << 30
				}
			})
		}, ClassIndexOutOfBounds},
		{"last row longer than its segment", func(t *testing.T, dir string) {
			n := len(indexRows(t, dir))
			rewriteIndex(t, dir, func(i int, r *wire.IndexRow) {
				if i == n-1 {
					r.ByteLength += 100
				}
			})
			rewriteManifest(t, dir, func(m *wire.Manifest) { m.Counters.BytesTotal += 100 })
		}, ClassIndexOutOfBounds},
		{"missing index", func(t *testing.T, dir string) {
			os.Remove(IndexPath(dir))
		}, ClassMissingFile},
		{"missing segment", func(t *testing.T, dir string) {
			os.Remove(SegmentPath(dir, 2))
		}, ClassMissingFile},
		{"missing manifest", func(t *testing.T, dir string) {
			os.Remove(ManifestPath(dir))
		}, ClassMissingFile},
		{"index lagging (a frame without its row)", func(t *testing.T, dir string) {
			rows := indexRows(t, dir)
			last := rows[len(rows)-1]
			f := wire.Frame{SegmentSeq: last.SegmentSeq, FrameSeq: last.FrameSeq + 1, EntrySeq: last.EntrySeq + 1,
				EntryID: "lagging1", ParentEntryID: last.EntryID, EntryType: wire.EntryCustom, Timestamp: wire.FormatTimestamp(fixedClock())}
			f.SetPayload([]byte(`{"customType":"x","id":"lagging1","parentId":"` + last.EntryID + `","timestamp":"2026-01-01T00:00:00.000Z","type":"custom"}`))
			appendBytes(t, SegmentPath(dir, last.SegmentSeq), wire.AppendFrame(nil, f))
		}, ClassIndexLagging},
		{"bad manifest hash", func(t *testing.T, dir string) {
			editFile(t, ManifestPath(dir), func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"updatedAt": "2026-01-01T00:00:00.000Z"`), []byte(`"updatedAt": "2026-01-01T00:00:01.000Z"`), 1)
			})
		}, ClassManifestMismatch},
		{"manifest counters off", func(t *testing.T, dir string) {
			rewriteManifest(t, dir, func(m *wire.Manifest) { m.Counters.MessagesTotal-- })
		}, ClassManifestMismatch},
		{"manifest head off", func(t *testing.T, dir string) {
			rewriteManifest(t, dir, func(m *wire.Manifest) { m.Head.EntrySeq-- })
		}, ClassManifestMismatch},
		{"invariant false", func(t *testing.T, dir string) {
			rewriteManifest(t, dir, func(m *wire.Manifest) { m.Invariants.HashChainValid = false })
		}, ClassInvariantFalse},
		{"chain break", func(t *testing.T, dir string) {
			rows := indexRows(t, dir)
			m := middleRow(t, rows)
			r := rows[m]
			seg := SegmentPath(dir, r.SegmentSeq)
			var newCRC string
			editFile(t, seg, func(b []byte) []byte {
				f, err := wire.ParseFrame(b[r.ByteOffset:r.End()])
				if err != nil {
					t.Fatal(err)
				}
				p := bytes.Replace(f.Payload, []byte(`"timestamp":"2`), []byte(`"timestamp":"3`), 1)
				f.SetPayload(p)
				line := wire.AppendFrame(nil, f)
				if len(line) != int(r.ByteLength) {
					t.Fatal("length changed")
				}
				copy(b[r.ByteOffset:], line)
				newCRC = wire.CRC32C(line)
				return b
			})
			rewriteIndex(t, dir, func(i int, row *wire.IndexRow) {
				if i == m {
					row.CRC32C = newCRC
				}
			})
		}, ClassChainBreak},
		{"unindexed segment", func(t *testing.T, dir string) {
			os.WriteFile(SegmentPath(dir, 99), []byte("{}\n"), 0o600)
		}, ClassUnindexedSegment},
		{"non-canonical segment name", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(SegmentsPath(dir), "7.seg"), nil, 0o600)
		}, ClassUnindexedSegment},
		{"0644 segment", func(t *testing.T, dir string) {
			os.Chmod(SegmentPath(dir, 1), 0o644)
		}, ClassBadMode},
		{"0755 dir", func(t *testing.T, dir string) {
			os.Chmod(SegmentsPath(dir), 0o755)
		}, ClassBadMode},
		{"0640 manifest", func(t *testing.T, dir string) {
			os.Chmod(ManifestPath(dir), 0o640)
		}, ClassBadMode},
		{"symlinked segment", func(t *testing.T, dir string) {
			seg := SegmentPath(dir, 2)
			elsewhere := filepath.Join(t.TempDir(), "seg")
			os.Rename(seg, elsewhere)
			if err := os.Symlink(elsewhere, seg); err != nil {
				t.Fatal(err)
			}
		}, ClassSymlink},
		{"index rows not contiguous", func(t *testing.T, dir string) {
			m := middleRow(t, indexRows(t, dir))
			rewriteIndex(t, dir, func(i int, r *wire.IndexRow) {
				if i == m {
					r.FrameSeq += 5
				}
			})
		}, ClassBadDocument},
		{"index row refused by the codec", func(t *testing.T, dir string) {
			editFile(t, IndexPath(dir), func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"state":"active"`), []byte(`"state":"compacted"`), 1)
			})
		}, ClassBadDocument},
		{"torn index", func(t *testing.T, dir string) {
			editFile(t, IndexPath(dir), func(b []byte) []byte { return b[:len(b)-7] })
		}, ClassTornTail},
		{"torn ledger", func(t *testing.T, dir string) {
			appendBytes(t, LedgerPath(dir), []byte(`{"schema":"pi.sess`))
		}, ClassTornTail},
		{"corrupt ledger line", func(t *testing.T, dir string) {
			appendBytes(t, LedgerPath(dir), []byte("{}\n"))
		}, ClassBadDocument},
		{"bad source state", func(t *testing.T, dir string) {
			os.WriteFile(SourceStatePath(dir), []byte(`{"schema":"pi.session_store_v2.source_state.v1","state":"stale"}`+"\n"), 0o600)
		}, ClassBadDocument},
		{"checkpoint going back", func(t *testing.T, dir string) {
			c, err := readCheckpoint(OSOps(), CheckpointPath(dir, 1), 1)
			if err != nil {
				t.Fatal(err)
			}
			c.CheckpointSeq, c.SnapshotRef, c.HeadEntrySeq = 2, wire.SnapshotRef(2), 1
			rows := indexRows(t, dir)
			c.HeadEntryID = rows[0].EntryID
			f, err := mustOpen(t, dir).ReadFrame(rows[0])
			if err != nil {
				t.Fatal(err)
			}
			c.ChainHash = wire.ChainStep(wire.ChainGenesis, f.PayloadSHA256)
			os.WriteFile(CheckpointPath(dir, 2), wire.AppendCheckpoint(nil, c), 0o600)
		}, ClassBadDocument},
		{"checkpoint chain differs", func(t *testing.T, dir string) {
			editFile(t, CheckpointPath(dir, 1), func(b []byte) []byte {
				c, err := wire.ParseCheckpoint(b)
				if err != nil {
					t.Fatal(err)
				}
				c.ChainHash = wire.ChainGenesis
				return wire.AppendCheckpoint(nil, c)
			})
		}, ClassChainBreak},
	}
	base := goodStore(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyStore(t, base)
			tc.damage(t, dir)
			ps, sum := mustOpen(t, dir).CheckSummary()
			if len(ps) == 0 {
				t.Fatalf("no problem found, want %s", tc.want)
			}
			// An index too big to keep in memory is read twice: the same
			// problems, in the same order, and the same summary.
			rereadPs, rereadSum := checkRereading(t, dir)
			if !reflect.DeepEqual(ps, rereadPs) || sum != rereadSum {
				t.Fatalf("with the index read twice:\n%v\n%+v\nwith it kept:\n%v\n%+v", rereadPs, rereadSum, ps, sum)
			}
			for _, p := range ps {
				if p.Class != tc.want {
					t.Fatalf("got %v, want only %s", ps, tc.want)
				}
			}
			t.Logf("%s", ps[0])
		})
	}
}

// checkRereading runs CheckSummary with no index row kept in memory, as for
// an index of more than rowsKept rows.
func checkRereading(tb testing.TB, dir string) ([]Problem, Summary) {
	tb.Helper()
	return mustOpen(tb, dir).checkSummary(0)
}

// A symlinked directory on the way to the store is found too.
func TestCheckSymlinkedAncestor(t *testing.T) {
	base := goodStore(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(filepath.Dir(base), link); err != nil {
		t.Fatal(err)
	}
	s := &Store{root: filepath.Join(link, filepath.Base(base)), max: wire.MaxSegmentBytes}
	ps := s.Check()
	if len(ps) != 1 || ps[0].Class != ClassSymlink {
		t.Fatalf("%v", ps)
	}
	if _, err := Open(s.root, ReadOptions{}); err == nil {
		t.Fatal("Open followed a symlinked ancestor")
	}
}

// The iterator stops at the damage with a positioned CorruptionError.
func TestEntriesReportsPositionedCorruption(t *testing.T) {
	base := goodStore(t)
	dir := copyStore(t, base)
	rows := indexRows(t, dir)
	m := middleRow(t, rows)
	r := rows[m]
	editFile(t, SegmentPath(dir, r.SegmentSeq), func(b []byte) []byte {
		b[r.ByteOffset+30] ^= 0x20
		return b
	})
	it := mustOpen(t, dir).Entries()
	n := 0
	for it.Next() {
		n++
	}
	var ce *CorruptionError
	err := it.Err()
	if !asCorruption(err, &ce) || ce.Segment != r.SegmentSeq || ce.Offset != int64(r.ByteOffset) || !strings.Contains(err.Error(), "crc32c") {
		t.Fatalf("err %v", err)
	}
	if !isChecksum(err) || isTorn(err) {
		t.Fatalf("%v should match wire.ErrChecksum only", err)
	}
	if n != m {
		t.Fatalf("%d frames before the damage, want %d", n, m)
	}

	for name, tc := range map[string]struct {
		damage func(dir string)
		want   error
	}{
		"unterminated tail": {func(dir string) { appendBytes(t, lastSegment(t, dir), []byte("{\"sch")) }, ErrTornTail},
		"zero-filled tail":  {func(dir string) { appendBytes(t, lastSegment(t, dir), make([]byte, 100)) }, ErrTornTail},
		"whole line after":  {func(dir string) { appendBytes(t, lastSegment(t, dir), []byte("{}\n")) }, ErrUncovered},
		"frame cut short": {func(dir string) {
			seg := lastSegment(t, dir)
			st, _ := os.Stat(seg)
			os.Truncate(seg, st.Size()-3)
		}, ErrTornTail},
		"unindexed segment": {func(dir string) { os.WriteFile(SegmentPath(dir, 77), nil, 0o600) }, ErrUncovered},
	} {
		dir := copyStore(t, base)
		tc.damage(dir)
		it := mustOpen(t, dir).Entries()
		for it.Next() {
		}
		if !errors.Is(it.Err(), tc.want) || (tc.want == ErrTornTail) == isUncovered(it.Err()) {
			t.Errorf("%s: %v", name, it.Err())
		}
	}
}

// TestCheckNoticesAnIndexChangedBetweenItsReads: an index too big to keep
// is read twice; if it is not the same the second time (cut short, or a
// row replaced), the check says so and vouches for no frame.
func TestCheckNoticesAnIndexChangedBetweenItsReads(t *testing.T) {
	base := goodStore(t)
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string)
		want   string
	}{
		{"cut short", func(t *testing.T, dir string) {
			rows := indexRows(t, dir)
			rewriteIndexRows(t, dir, rows[:len(rows)/2])
		}, "changed while being checked: line"},
		{"a row replaced", func(t *testing.T, dir string) {
			rows := indexRows(t, dir)
			rows[1].EntryID = "someone-else"
			rewriteIndexRows(t, dir, rows)
		}, "is not the row read before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyStore(t, base)
			opens := 0
			ops := durable.OS
			ops.OpenFile = func(path string, flag int, perm os.FileMode) (*os.File, error) {
				if path == IndexPath(dir) {
					if opens++; opens == 2 {
						tc.change(t, dir) // between readIndex and the frames
					}
				}
				return durable.OS.OpenFile(path, flag, perm)
			}
			st, err := Open(dir, ReadOptions{Ops: ops})
			if err != nil {
				t.Fatal(err)
			}
			ps, sum := st.checkSummary(0)
			if opens < 2 || sum.FramesOK || !strings.Contains(fmt.Sprint(ps), tc.want) {
				t.Fatalf("%d opens of the index, framesOK %v, problems %v; want one naming %q", opens, sum.FramesOK, ps, tc.want)
			}
		})
	}
}

// rewriteIndexRows replaces the index with rows.
func rewriteIndexRows(tb testing.TB, dir string, rows []wire.IndexRow) {
	tb.Helper()
	var b []byte
	for _, r := range rows {
		b = wire.AppendIndexRow(b, r)
	}
	if err := os.WriteFile(IndexPath(dir), b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// The index rows kept in memory are allocated once, sized from the index
// file; an index surely longer than rowsKept rows keeps none from its first
// row, and the check finds the same either way.
func TestIndexRowsAllocatedOnce(t *testing.T) {
	dir := goodStore(t)
	fi, err := os.Stat(IndexPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	run := func(keep int) *checker {
		c := &checker{s: mustOpen(t, dir), segs: map[uint64]*segInfo{}, fastFrames: true, rowsKept: keep}
		c.check()
		return c
	}
	c := run(rowsKept)
	if len(c.problems) != 0 || c.nrows < 2 || len(c.rows) != c.nrows {
		t.Fatalf("problems %v, %d rows, %d kept", c.problems, c.nrows, len(c.rows))
	}
	if want := int(fi.Size()/minIndexRowBytes + 1); cap(c.rows) != want {
		t.Errorf("rows' capacity %d, want %d: grown by appends", cap(c.rows), want)
	}
	keep := int(fi.Size() / maxIndexRowBytes)
	r := run(keep)
	if r.rows != nil || len(r.problems) != 0 || r.chain != c.chain || r.nrows != c.nrows {
		t.Errorf("rowsKept %d: rows kept %d, problems %v, chain %s (want %s)", keep, len(r.rows), r.problems, r.chain, c.chain)
	}
}
