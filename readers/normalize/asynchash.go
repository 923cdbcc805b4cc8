package normalize

import (
	"crypto/sha256"
	"encoding"
	"hash"

	"github.com/zeebo/xxh3"

	"pisess/writers/bufpool"
)

// hashBlock is how many bytes asyncHash gathers before it hands them to a
// helper goroutine: small enough that most of a small session's bytes are
// hashed beside its parse, large enough that a goroutine per block costs
// nothing beside hashing it.
const hashBlock = 64 << 10

var hashBlocks = bufpool.NewBytes(hashBlock)

// PrefixHash lets a later read of a file that has only grown go on from
// its first n bytes without hashing them with SHA-256 again (issue 14:
// the refresh of a 100 MB session that gained one line): SHA256State is
// the SHA-256's state after them (crypto/sha256's MarshalBinary, whose
// form the standard library keeps across versions), and XXH3 their 128-bit
// XXH3, a hash twenty times faster than SHA-256 that proves them unchanged
// (against accidents: see pisess(1), SECURITY, in commands/manual.go).
type PrefixHash struct {
	SHA256State []byte
	XXH3        [16]byte
}

// NewPrefixHashes returns the two hashes of a PrefixHash: a SHA-256 that
// starts from p's state (a fresh one for the zero PrefixHash) and a fresh
// XXH3, or false when p's state is not one.
func NewPrefixHashes(p PrefixHash) (sha, x hash.Hash, ok bool) {
	sha = sha256.New()
	if p.SHA256State != nil {
		if err := sha.(encoding.BinaryUnmarshaler).UnmarshalBinary(p.SHA256State); err != nil {
			return nil, nil, false
		}
	}
	return sha, xxh3.New128(), true
}

// PrefixOf returns the PrefixHash of the bytes sha and x have hashed.
func PrefixOf(sha, x hash.Hash) PrefixHash {
	st, err := sha.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		// crypto/sha256 marshals every state; nil makes a record that
		// a refresh refuses (a full rebuild), never a wrong one.
		st = nil
	}
	var p PrefixHash
	p.SHA256State = st
	x.Sum(p.XXH3[:0])
	return p
}

// asyncHash is a SHA-256 (and the XXH3 of a PrefixHash) of the bytes
// written to it, computed one block behind on a helper goroutine: a
// source's fingerprint no longer costs its parse (issue 14; with --jobs 1
// the second core was idle meanwhile). Write copies, so the caller may
// reuse its slice at once. At most one block is being hashed at a time;
// sum waits for it.
type asyncHash struct {
	h, x   hash.Hash
	blocks [2][]byte // the block being filled is blocks[0]
	busy   chan struct{}
}

func newAsyncHash() *asyncHash {
	return &asyncHash{h: sha256.New(), x: xxh3.New128()}
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
		a.x.Write(full)
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
	a.flush()
	a.h.Sum(d[:0])
	return d
}

// prefix returns the PrefixHash of everything written so far.
func (a *asyncHash) prefix() PrefixHash {
	a.flush()
	return PrefixOf(a.h, a.x)
}

// flush hashes what was written and not yet handed over.
func (a *asyncHash) flush() {
	a.wait()
	if len(a.blocks[0]) > 0 {
		a.h.Write(a.blocks[0])
		a.x.Write(a.blocks[0])
		a.blocks[0] = a.blocks[0][:0]
	}
}

// reset starts over, as a new asyncHash.
func (a *asyncHash) reset() {
	a.wait()
	a.h.Reset()
	a.x.Reset()
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
