package writers

import (
	"context"

	"pisess/readers"
	"pisess/writers/bufpool"
)

// A batch of entries read ahead is handed over when it holds this many
// entries or payload bytes: large enough that the hand-over costs nothing
// beside the entries' work, small enough to stay in the cache.
const (
	aheadEntries = 256
	aheadBytes   = 256 << 10
)

// aheadArenas hold the payloads of a batch read from a readers.Appender:
// one buffer a batch, handed back once its entries are written, instead of
// a slice an entry. An arena grows to what the batches of the run need (a
// batch ends at the entry that reaches aheadBytes, so one of large entries
// needs a little more than that; one of 256 small ones, less) and is kept
// up to 1 MiB: three at a time per job hold no more than the payloads did.
var aheadArenas = bufpool.NewArenas(64<<10, 1<<20)

// entryBatch is a run of entries read ahead, in source order; err (io.EOF
// at the end) follows its entries. arena, when set, holds their payloads.
type entryBatch struct {
	entries []readers.Entry
	err     error
	arena   []byte
}

// release hands the batch's arena back: its entries' payloads must not be
// used after.
func (b *entryBatch) release() {
	if b.arena != nil {
		aheadArenas.Put(b.arena)
		b.arena = nil
	}
}

// readAhead reads src on a goroutine of its own, so that decoding the
// source (the larger half of a build's CPU) overlaps the encoding, hashing
// and writing of the entries before (issue 14: a build of one session used
// one core). The channel is unbuffered: besides the batch being written,
// at most one more is held, so memory stays within two batches (and two
// entries, if one is larger than a batch) of the serial reader's. Entries
// are independent values (readers.Source's contract), so they can cross
// goroutines as they are.
//
// stop must be called before src is used again or closed: it waits for
// the reading goroutine to finish its current entry and exit.
func readAhead(ctx context.Context, src readers.Source) (batches <-chan entryBatch, stop func()) {
	out := make(chan entryBatch)
	done := make(chan struct{})
	app, _ := src.(readers.Appender)
	go func() {
		defer close(out)
		for {
			b := entryBatch{entries: make([]readers.Entry, 0, aheadEntries)}
			if app != nil {
				b.arena = aheadArenas.Get()
			}
			size := 0
			for len(b.entries) < aheadEntries && size < aheadBytes {
				if err := ctx.Err(); err != nil {
					b.err = err
					break
				}
				select {
				case <-done:
					return // the writer stopped: read no further
				default:
				}
				var e readers.Entry
				var err error
				if app != nil {
					e, b.arena, err = app.NextAppend(b.arena)
				} else {
					e, err = src.Next()
				}
				if err != nil {
					b.err = err
					break
				}
				b.entries = append(b.entries, e)
				size += len(e.Payload)
			}
			select {
			case out <- b:
			case <-done:
				return
			}
			if b.err != nil {
				return
			}
		}
	}()
	stopped := false
	return out, func() {
		if stopped {
			return
		}
		stopped = true
		close(done)
		for range out {
		}
	}
}
