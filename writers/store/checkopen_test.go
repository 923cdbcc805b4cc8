package store

import (
	"os"
	"testing"

	"pisess/writers/wire"
)

// TestCheckOpen: CheckOpen finds what pi's open of a large store finds —
// a segment cut short or grown, its last frame changed, a row that leaves
// its segment, a missing segment, a manifest that disagrees with the
// index — and, reading no frame but each segment's last, not a byte
// changed in a frame in the middle of a segment (Check finds that).
func TestCheckOpen(t *testing.T) {
	if p := mustOpen(t, goodStore(t)).CheckOpen(); len(p) != 0 {
		t.Fatalf("the good store: %v", p)
	}
	flipIn := func(t *testing.T, dir string, row func(rows []wire.IndexRow) wire.IndexRow) {
		r := row(indexRows(t, dir))
		editFile(t, SegmentPath(dir, r.SegmentSeq), func(b []byte) []byte {
			b[r.End()-20] ^= 0x01
			return b
		})
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   Class // "": CheckOpen finds nothing
	}{
		{"torn last frame", func(t *testing.T, dir string) {
			seg := lastSegment(t, dir)
			st, _ := os.Stat(seg)
			os.Truncate(seg, st.Size()-10)
		}, ClassTornTail},
		{"zero-filled tail", func(t *testing.T, dir string) {
			appendBytes(t, lastSegment(t, dir), make([]byte, 512))
		}, ClassTornTail},
		{"a flipped byte in the last frame", func(t *testing.T, dir string) {
			flipIn(t, dir, func(rows []wire.IndexRow) wire.IndexRow { return rows[len(rows)-1] })
		}, ClassCRCMismatch},
		{"a flipped byte in the first segment's last frame", func(t *testing.T, dir string) {
			flipIn(t, dir, func(rows []wire.IndexRow) wire.IndexRow {
				for i := range rows {
					if rows[i+1].SegmentSeq != rows[i].SegmentSeq {
						return rows[i]
					}
				}
				return wire.IndexRow{}
			})
		}, ClassCRCMismatch},
		{"last row longer than its segment", func(t *testing.T, dir string) {
			n := len(indexRows(t, dir))
			rewriteIndex(t, dir, func(i int, r *wire.IndexRow) {
				if i == n-1 {
					r.ByteLength += 100
				}
			})
			rewriteManifest(t, dir, func(m *wire.Manifest) { m.Counters.BytesTotal += 100 })
		}, ClassIndexOutOfBounds},
		{"missing segment", func(t *testing.T, dir string) { os.Remove(SegmentPath(dir, 2)) }, ClassMissingFile},
		{"manifest head off", func(t *testing.T, dir string) {
			rewriteManifest(t, dir, func(m *wire.Manifest) { m.Head.EntrySeq-- })
		}, ClassManifestMismatch},
		{"a flipped byte in a middle frame", func(t *testing.T, dir string) {
			flipIn(t, dir, func(rows []wire.IndexRow) wire.IndexRow { return rows[middleRow(t, rows)] })
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := goodStore(t)
			tc.damage(t, dir)
			got := mustOpen(t, dir).CheckOpen()
			switch {
			case tc.want == "" && len(got) != 0:
				t.Fatalf("CheckOpen reads a middle frame: %v", got)
			case tc.want == "" && len(mustOpen(t, dir).Check()) == 0:
				t.Fatal("the damage is not damage (Check finds nothing)")
			case tc.want != "" && (len(got) == 0 || got[0].Class != tc.want):
				t.Fatalf("CheckOpen: %v, want a problem of class %s", got, tc.want)
			}
		})
	}
}
