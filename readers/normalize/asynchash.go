package normalize

import (
	"crypto/sha256"
	"hash"

	"pisess/writers/bufpool"
)

// hashBlock is how many bytes asyncHash gathers before it hands them to a
// helper goroutine: small enough that most of a small session's bytes are
// hashed beside its parse, large enough that a goroutine per block costs
// nothing beside hashing it.
const hashBlock = 64 << 10

var hashBlocks = bufpool.NewBytes(hashBlock)

// asyncHash is a SHA-256 of the bytes written to it, computed one block
// behind on a helper goroutine: a source's fingerprint no longer costs its
// parse (issue 14; with --jobs 1 the second core was idle meanwhile).
// Write copies, so the caller may reuse its slice at once. At most one
// block is being hashed at a time; sum waits for it.
type asyncHash struct {
	h      hash.Hash
	blocks [2][]byte // the block being filled is blocks[0]
	busy   chan struct{}
}

func newAsyncHash() *asyncHash {
	return &asyncHash{h: sha256.New()}
}

func (a *asyncHash) write(p []byte) {
	for len(p) > 0 {
		if a.blocks[0] == nil {
			a.blocks[0] = hashBlocks.Get()[:0]
		}
		b := a.blocks[0]
		n := copy(b[len(b):cap(b)], p)
		a.blocks[0] = b[:len(b)+n]
		p = p[n:]
		if len(a.blocks[0]) == cap(a.blocks[0]) {
			a.handOver()
		}
	}
}

// handOver starts hashing the full block once the one before is done.
func (a *asyncHash) handOver() {
	a.wait()
	full := a.blocks[0]
	a.blocks[0], a.blocks[1] = a.blocks[1], full
	if a.blocks[0] != nil {
		a.blocks[0] = a.blocks[0][:0]
	}
	done := make(chan struct{})
	a.busy = done
	go func() {
		a.h.Write(full)
		close(done)
	}()
}

func (a *asyncHash) wait() {
	if a.busy != nil {
		<-a.busy
		a.busy = nil
	}
}

// sum returns the SHA-256 of everything written so far.
func (a *asyncHash) sum() (d [32]byte) {
	a.wait()
	if len(a.blocks[0]) > 0 {
		a.h.Write(a.blocks[0])
		a.blocks[0] = a.blocks[0][:0]
	}
	a.h.Sum(d[:0])
	return d
}

// reset starts over, as a new asyncHash.
func (a *asyncHash) reset() {
	a.wait()
	a.h.Reset()
	if a.blocks[0] != nil {
		a.blocks[0] = a.blocks[0][:0]
	}
}

// release hands the blocks back; a must not be written to again.
func (a *asyncHash) release() {
	a.wait()
	for i, b := range a.blocks {
		if b != nil {
			hashBlocks.Put(b[:cap(b)])
			a.blocks[i] = nil
		}
	}
}
