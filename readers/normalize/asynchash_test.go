package normalize

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"math/rand/v2"
	"testing"

	"github.com/zeebo/xxh3"

	"pisess/writers/wire"
)

// TestAsyncHash: writes of every size, across and at block boundaries,
// sums taken midway, a reset and a release, give sha256's answer.
func TestAsyncHash(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 5*hashBlock+123)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	sizes := []int{0, 1, 7, hashBlock - 1, hashBlock, hashBlock + 1, 2 * hashBlock, 3000}
	for round := 0; round < 50; round++ {
		a := newAsyncHash()
		if round%5 == 4 {
			a.write(data[:1000])
			a.reset()
		}
		n := 0
		for n < len(data) {
			k := sizes[r.IntN(len(sizes))]
			if round%2 == 1 {
				k = r.IntN(3 * hashBlock)
			}
			k = min(k, len(data)-n)
			a.write(data[n : n+k])
			n += k
			if r.IntN(4) == 0 {
				if got, want := a.sum(), sha256.Sum256(data[:n]); got != want {
					t.Fatalf("round %d: sum after %d bytes differs", round, n)
				}
				checkPrefix(t, a.prefix(), data, n)
			}
		}
		if got, want := a.sum(), sha256.Sum256(data); got != want {
			t.Fatalf("round %d: sum of all differs", round)
		}
		checkPrefix(t, a.prefix(), data, len(data))
		a.release()
	}
}

// checkPrefix checks that p is the PrefixHash of data[:n]: its XXH3 is
// the library's of those bytes, its state says n bytes, and the SHA-256
// restored from it and given the rest of data ends as data's own.
func checkPrefix(t *testing.T, p PrefixHash, data []byte, n int) {
	t.Helper()
	if want := xxh3.Hash128(data[:n]).Bytes(); p.XXH3 != want {
		t.Fatalf("XXH3 of %d bytes differs", n)
	}
	if got, ok := wire.SHA256StateLength(p.SHA256State); !ok || got != uint64(n) {
		t.Fatalf("state length %d %v, want %d", got, ok, n)
	}
	sha, x, ok := NewPrefixHashes(p)
	if !ok {
		t.Fatal("state not restored")
	}
	sha.Write(data[n:])
	if got, want := sha.Sum(nil), sha256.Sum256(data); !bytes.Equal(got, want[:]) {
		t.Fatalf("SHA-256 continued after %d bytes differs", n)
	}
	x.Write(data)
	if got, want := x.Sum(nil), xxh3.Hash128(data).Bytes(); !bytes.Equal(got, want[:]) {
		t.Fatal("a fresh XXH3 of the whole differs")
	}
}

// TestPrefixHashRefusesBadState: a state that is not crypto/sha256's of
// some length is refused, never restored as something else.
func TestPrefixHashRefusesBadState(t *testing.T) {
	a := newAsyncHash()
	a.write([]byte("hello\n"))
	good := a.prefix().SHA256State
	a.release()
	if n, ok := wire.SHA256StateLength(good); !ok || n != 6 {
		t.Fatalf("good state: %d %v", n, ok)
	}
	sha224 := sha256.New224()
	st224, _ := sha224.(encoding.BinaryMarshaler).MarshalBinary()
	for name, st := range map[string][]byte{
		"short":  good[:len(good)-1],
		"long":   append(bytes.Clone(good), 0),
		"magic":  append([]byte("shb\x03"), good[4:]...),
		"sha224": st224,
		"empty":  {},
	} {
		if _, ok := wire.SHA256StateLength(st); ok {
			t.Errorf("%s: length read from a bad state", name)
		}
		if _, _, ok := NewPrefixHashes(PrefixHash{SHA256State: st}); ok {
			t.Errorf("%s: bad state restored", name)
		}
	}
}
