package normalize

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"
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
			}
		}
		if got, want := a.sum(), sha256.Sum256(data); got != want {
			t.Fatalf("round %d: sum of all differs", round)
		}
		a.release()
	}
}
