package writers

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"unsafe"

	"pisess/readers"
)

// appendingSource is a sliceSource that is a readers.Appender: it copies
// each payload into the buffer it is given and notes every buffer's array.
type appendingSource struct {
	sliceSource
	arenas map[*byte]bool
}

func (s *appendingSource) NextAppend(buf []byte) (readers.Entry, []byte, error) {
	if cap(buf) > 0 {
		s.arenas[unsafe.SliceData(buf)] = true
	}
	e, err := s.sliceSource.Next()
	if err != nil {
		return e, buf, err
	}
	grown := append(buf, e.Payload...)
	e.Payload = grown[len(buf):len(grown):len(grown)]
	return e, grown, nil
}

// TestStageReusesArenas: reading ahead from an Appender puts a batch's
// payloads in one buffer, handed back once the batch is written: forty
// batches go through a few buffers (at most the three a stage holds at
// once, and what the free list held before), and every payload reaches
// its frame intact although its buffer is written over afterwards.
func TestStageReusesArenas(t *testing.T) {
	const batches = 40
	var entries []readers.Entry
	for i := 0; i < batches*aheadEntries; i++ {
		parent := ""
		if i > 0 {
			parent = entries[i-1].ID
		}
		entries = append(entries, entry(fmt.Sprintf("e%06d", i), parent))
	}
	src := &appendingSource{sliceSource: sliceSource{header: readers.Header{ID: sessionID, Format: readers.FormatJSONLv3}, entries: entries},
		arenas: map[*byte]bool{}}
	res, err := Stage(context.Background(), src, filepath.Join(t.TempDir(), "s.v2.staging.x"), StageOptions{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if res.Entries != uint64(len(entries)) || res.ChainHash != chainOf(entries) {
		t.Fatalf("staged %d entries, chain %s; want %d, %s", res.Entries, res.ChainHash, len(entries), chainOf(entries))
	}
	if n := len(src.arenas); n == 0 || n > 3+16 {
		t.Errorf("%d batches used %d buffers: they are not handed back", batches, n)
	}
}
