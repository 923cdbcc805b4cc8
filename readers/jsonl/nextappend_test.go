package jsonl

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"pisess/fixtures"
	"pisess/readers"
)

// readAppending drains path with NextAppend, starting from buf and going
// on with the buffer each call returns.
func readAppending(tb testing.TB, path string, buf []byte) ([]readers.Entry, []byte, error) {
	tb.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	var out []readers.Entry
	for {
		var e readers.Entry
		e, buf, err = s.NextAppend(buf)
		if err == io.EOF {
			return out, buf, nil
		}
		if err != nil {
			return out, buf, err
		}
		out = append(out, e)
	}
}

// NextAppend gives every vector session the entries Next gives, each
// payload capped at its own end, and, while the buffer has room, laid
// one after another in it.
func TestNextAppendVectors(t *testing.T) {
	srcs, err := filepath.Glob(filepath.Join(fixtures.VectorsDir(t), "*", "*", "source.jsonl"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	for _, src := range srcs {
		want, _, wantErr := readAll(t, src, Options{})
		for _, room := range []int{16, 1 << 20} {
			buf := make([]byte, 0, room)
			got, last, err := readAppending(t, src, buf)
			if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
				t.Fatalf("%s (room %d): error %v, Next's %v", src, room, err, wantErr)
			}
			if len(got) != len(want) {
				t.Fatalf("%s (room %d): %d entries, Next gave %d", src, room, len(got), len(want))
			}
			end := 0
			for i, e := range got {
				w := want[i]
				if e.ID != w.ID || e.ParentID != w.ParentID || e.Type != w.Type || e.Position != w.Position || !bytes.Equal(e.Payload, w.Payload) {
					t.Fatalf("%s (room %d) entry %d: %+v, Next gave %+v", src, room, i+1, e, w)
				}
				if cap(e.Payload) != len(e.Payload) {
					t.Errorf("%s entry %d: payload cap %d > len %d: an append to it would write over the next", src, i+1, cap(e.Payload), len(e.Payload))
				}
				if room == 1<<20 && len(last) <= room {
					if len(e.Payload) > 0 && unsafe.Pointer(&e.Payload[0]) != unsafe.Pointer(&buf[:end+1][end]) {
						t.Fatalf("%s entry %d: payload not at offset %d of the buffer", src, i+1, end)
					}
					end += len(e.Payload)
				}
			}
			if room == 1<<20 && len(last) <= room && len(last) != end {
				t.Errorf("%s: buffer holds %d bytes, the payloads %d", src, len(last), end)
			}
		}
	}
}

// A long entry that does not fit in what is left of the buffer gets a
// payload of its own, and the buffer comes back as it was: the buffer is
// not grown by copies for it. Short entries around it still go into the
// buffer.
func TestNextAppendLongEntryOwnPayload(t *testing.T) {
	long := strings.Replace(msg("b2", "a1"), `"hi b2"`, `"`+strings.Repeat("x", 2*ownPayloadBytes)+`"`, 1)
	path := writeFile(t, "long.jsonl", session(msg("a1", ""), long, msg("c3", "b2")))
	buf := make([]byte, 0, 4096)
	got, last, err := readAppending(t, path, buf)
	if err != nil || len(got) != 3 {
		t.Fatalf("%d entries, %v", len(got), err)
	}
	inBuf := func(p []byte) bool {
		return len(p) > 0 && uintptr(unsafe.Pointer(&p[0])) >= uintptr(unsafe.Pointer(&buf[:1][0])) &&
			uintptr(unsafe.Pointer(&p[0])) < uintptr(unsafe.Pointer(&buf[:1][0]))+uintptr(cap(buf))
	}
	if !inBuf(got[0].Payload) || inBuf(got[1].Payload) || !inBuf(got[2].Payload) {
		t.Errorf("in the buffer: %v %v %v, want true false true", inBuf(got[0].Payload), inBuf(got[1].Payload), inBuf(got[2].Payload))
	}
	if cap(last) != cap(buf) || len(last) != len(got[0].Payload)+len(got[2].Payload) {
		t.Errorf("buffer len %d cap %d after: grown for the long entry", len(last), cap(last))
	}
	if len(got[1].Payload) < 2*ownPayloadBytes || !bytes.Contains(got[1].Payload, []byte("xxxx")) {
		t.Errorf("long payload of %d bytes", len(got[1].Payload))
	}
}
