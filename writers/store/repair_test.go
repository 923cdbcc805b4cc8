package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"pisess/writers/wire"
)

func entryCount(tb testing.TB, dir string) int {
	tb.Helper()
	it := mustOpen(tb, dir).Entries()
	defer it.Close()
	n := 0
	for it.Next() {
		n++
	}
	if err := it.Err(); err != nil {
		tb.Fatal(err)
	}
	return n
}

// Repair round trips (etcd's testRepair): damage → exact finding → repair
// → clean → the surviving entries read back.
func TestRepairRoundTrips(t *testing.T) {
	base := goodStore(t)
	total := entryCount(t, base)
	m0, _ := mustOpen(t, base).Manifest()
	session := m0.SessionID

	t.Run("zero-filled tail: cut it", func(t *testing.T) {
		dir := copyStore(t, base)
		seg := lastSegment(t, dir)
		appendBytes(t, seg, make([]byte, 300))
		cut, err := CutTornTail(seg)
		if err != nil || len(cut) != 300 || !isZero(cut) {
			t.Fatalf("cut %d bytes, %v", len(cut), err)
		}
		if ps := mustOpen(t, dir).Check(); len(ps) != 0 {
			t.Fatal(ps)
		}
		if cut, err := CutTornTail(seg); err != nil || len(cut) != 0 {
			t.Fatalf("second cut: %d bytes, %v", len(cut), err)
		}
	})

	t.Run("torn last frame: cut, rebuild index, recompute manifest", func(t *testing.T) {
		dir := copyStore(t, base)
		seg := lastSegment(t, dir)
		st, _ := os.Stat(seg)
		os.Truncate(seg, st.Size()-25)
		if ps := mustOpen(t, dir).Check(); len(ps) != 1 || ps[0].Class != ClassTornTail {
			t.Fatal(ps)
		}
		if _, err := CutTornTail(seg); err != nil {
			t.Fatal(err)
		}
		n, err := RebuildIndex(dir)
		if err != nil || n != total-1 {
			t.Fatalf("rebuilt %d rows, %v", n, err)
		}
		// The manifest now describes one entry too many; nothing else is wrong.
		for _, p := range mustOpen(t, dir).Check() {
			if p.Path != ManifestPath(dir) {
				t.Fatal(p)
			}
		}
		m, err := RecomputeManifest(dir, session, wire.FormatJSONLv3)
		if err != nil {
			t.Fatal(err)
		}
		if m.CreatedAt != m0.CreatedAt || m.Counters.EntriesTotal != uint64(total-1) {
			t.Fatalf("manifest %+v", m)
		}
		if ps := mustOpen(t, dir).Check(); len(ps) != 0 {
			t.Fatal(ps)
		}
		if entryCount(t, dir) != total-1 {
			t.Fatal("entries")
		}
	})

	t.Run("lost index: rebuild gives the same bytes", func(t *testing.T) {
		dir := copyStore(t, base)
		want, _ := os.ReadFile(IndexPath(dir))
		os.Remove(IndexPath(dir))
		if _, err := RebuildIndex(dir); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(IndexPath(dir))
		if !bytes.Equal(got, want) {
			t.Fatal("rebuilt index differs")
		}
		if ps := mustOpen(t, dir).Check(); len(ps) != 0 {
			t.Fatal(ps)
		}
	})

	t.Run("corrupt frame: rebuild refuses", func(t *testing.T) {
		dir := copyStore(t, base)
		rows := indexRows(t, dir)
		r := rows[middleRow(t, rows)]
		editFile(t, SegmentPath(dir, r.SegmentSeq), func(b []byte) []byte {
			b[r.End()-20] ^= 1
			return b
		})
		before, _ := os.ReadFile(IndexPath(dir))
		_, err := RebuildIndex(dir)
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.Segment != r.SegmentSeq || ce.Offset != int64(r.ByteOffset) {
			t.Fatalf("%v", err)
		}
		after, _ := os.ReadFile(IndexPath(dir))
		if !bytes.Equal(before, after) {
			t.Fatal("the index changed")
		}
	})

	t.Run("recompute refuses a store with other problems", func(t *testing.T) {
		dir := copyStore(t, base)
		os.Chmod(SegmentPath(dir, 1), 0o644)
		if _, err := RecomputeManifest(dir, session, wire.FormatJSONLv3); err == nil {
			t.Fatal("recomputed over a bad mode")
		}
	})

	t.Run("mutation lock excludes a second holder", func(t *testing.T) {
		dir := copyStore(t, base)
		l, err := LockMutation(context.Background(), dir, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := LockMutation(context.Background(), dir, 20*time.Millisecond); err == nil {
			t.Fatal("second lock taken")
		}
		l.Unlock()
	})
}
