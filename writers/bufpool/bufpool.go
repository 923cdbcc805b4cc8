// Package bufpool keeps the large read and write buffers of a run for
// reuse from session to session. A sync.Pool is emptied by every second
// garbage collection, and a run over many sessions collects often enough
// that its megabyte buffers were reallocated, zeroed and handed back to
// the system for nearly every session; a small bounded free list keeps
// them for as long as the process runs, at a fixed cost.
package bufpool

import "bufio"

// keep bounds each list: enough for the most concurrent users a run has
// (one per job, and jobs are a handful of cores).
const keep = 16

// Readers is a free list of bufio.Readers of one size.
type Readers struct {
	size int
	free chan *bufio.Reader
}

// NewReaders makes a free list of readers of size bytes.
func NewReaders(size int) *Readers {
	return &Readers{size: size, free: make(chan *bufio.Reader, keep)}
}

// Get returns a reader of the list's size, reset to nothing.
func (p *Readers) Get() *bufio.Reader {
	select {
	case r := <-p.free:
		return r
	default:
		return bufio.NewReaderSize(nil, p.size)
	}
}

// Put hands r back (it is dropped when the list is full or r is not of the
// list's size).
func (p *Readers) Put(r *bufio.Reader) {
	if r == nil || r.Size() != p.size {
		return
	}
	r.Reset(nil)
	select {
	case p.free <- r:
	default:
	}
}

// Writers is a free list of bufio.Writers of one size.
type Writers struct {
	size int
	free chan *bufio.Writer
}

// NewWriters makes a free list of writers of size bytes.
func NewWriters(size int) *Writers {
	return &Writers{size: size, free: make(chan *bufio.Writer, keep)}
}

// Get returns a writer of the list's size, reset to nothing.
func (p *Writers) Get() *bufio.Writer {
	select {
	case w := <-p.free:
		return w
	default:
		return bufio.NewWriterSize(nil, p.size)
	}
}

// Put hands w back; buffered bytes not yet flushed are discarded.
func (p *Writers) Put(w *bufio.Writer) {
	if w == nil || w.Size() != p.size {
		return
	}
	w.Reset(nil)
	select {
	case p.free <- w:
	default:
	}
}

// Bytes is a free list of byte slices of one size.
type Bytes struct {
	size int
	free chan []byte
}

// NewBytes makes a free list of slices of size bytes.
func NewBytes(size int) *Bytes {
	return &Bytes{size: size, free: make(chan []byte, keep)}
}

// Get returns a slice of the list's size (its bytes are whatever they were).
func (p *Bytes) Get() []byte {
	select {
	case b := <-p.free:
		return b
	default:
		return make([]byte, p.size)
	}
}

// Put hands b back (dropped when the list is full or b is not of the
// list's size).
func (p *Bytes) Put(b []byte) {
	if len(b) != p.size {
		return
	}
	select {
	case p.free <- b:
	default:
	}
}

// Arenas is a free list of byte slices that grow with their use: each is
// handed out empty, with the capacity its last user left it, and kept
// while that is at most max. A user whose data outgrows it appends, and
// what it hands back has room for the next one of its kind.
type Arenas struct {
	min, max int
	free     chan []byte
}

// NewArenas makes a free list of arenas of at least min bytes, keeping
// none larger than max.
func NewArenas(min, max int) *Arenas {
	return &Arenas{min: min, max: max, free: make(chan []byte, keep)}
}

// Get returns an empty arena.
func (p *Arenas) Get() []byte {
	select {
	case b := <-p.free:
		return b[:0]
	default:
		return make([]byte, 0, p.min)
	}
}

// Put hands b back (dropped when the list is full or b has grown past
// max).
func (p *Arenas) Put(b []byte) {
	if cap(b) < p.min || cap(b) > p.max {
		return
	}
	select {
	case p.free <- b:
	default:
	}
}
