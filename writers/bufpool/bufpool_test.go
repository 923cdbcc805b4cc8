package bufpool

import (
	"bufio"
	"bytes"
	"runtime"
	"testing"
)

func TestReadersReuseAcrossCollections(t *testing.T) {
	p := NewReaders(4096)
	r := p.Get()
	if r.Size() != 4096 {
		t.Fatalf("size %d", r.Size())
	}
	r.Reset(bytes.NewReader([]byte("abc")))
	r.Peek(1)
	p.Put(r)
	runtime.GC()
	runtime.GC() // a sync.Pool would be empty now
	if got := p.Get(); got != r {
		t.Fatal("the reader handed back was not reused")
	} else if got.Buffered() != 0 {
		t.Fatal("a reused reader still holds its old source's bytes")
	}
	p.Put(bufio.NewReaderSize(nil, 8192)) // another size: dropped
	if got := p.Get(); got.Size() != 4096 {
		t.Fatalf("got a reader of %d bytes", got.Size())
	}
}

func TestWritersBounded(t *testing.T) {
	p := NewWriters(4096)
	var ws []*bufio.Writer
	for i := 0; i < keep+4; i++ {
		ws = append(ws, p.Get())
	}
	for _, w := range ws {
		p.Put(w)
	}
	if len(p.free) != keep {
		t.Fatalf("%d writers kept, want at most %d", len(p.free), keep)
	}
	var buf bytes.Buffer
	w := p.Get()
	w.Reset(&buf)
	w.WriteString("x")
	w.Flush()
	if buf.String() != "x" {
		t.Fatalf("wrote %q", buf.String())
	}
}

func TestBytesReuse(t *testing.T) {
	p := NewBytes(4096)
	b := p.Get()
	if len(b) != 4096 {
		t.Fatalf("len %d", len(b))
	}
	p.Put(b)
	runtime.GC()
	runtime.GC()
	if got := p.Get(); &got[0] != &b[0] {
		t.Fatal("the slice handed back was not reused")
	}
	p.Put(make([]byte, 10)) // another size: dropped
	if got := p.Get(); len(got) != 4096 {
		t.Fatalf("got %d bytes", len(got))
	}
}

func TestArenasKeepTheirGrowth(t *testing.T) {
	p := NewArenas(64, 1024)
	a := p.Get()
	if len(a) != 0 || cap(a) < 64 {
		t.Fatalf("new arena: len %d cap %d", len(a), cap(a))
	}
	a = append(a, bytes.Repeat([]byte("x"), 300)...) // outgrows 64
	p.Put(a)
	runtime.GC()
	b := p.Get()
	if len(b) != 0 || cap(b) != cap(a) || &b[:1][0] != &a[0] {
		t.Fatalf("handed back an arena of cap %d, got len %d cap %d (another array: %v)", cap(a), len(b), cap(b), &b[:1][0] != &a[0])
	}
	p.Put(make([]byte, 0, 4096)) // past max: dropped
	if c := p.Get(); cap(c) != 64 {
		t.Fatalf("an arena past max was kept: cap %d", cap(c))
	}
	for i := 0; i < keep+5; i++ {
		p.Put(make([]byte, 0, 128))
	}
	if n := len(p.free); n != keep {
		t.Fatalf("%d arenas kept, want at most %d", n, keep)
	}
}
