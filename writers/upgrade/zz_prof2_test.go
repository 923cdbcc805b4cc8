package upgrade

import (
	"bufio"
	"os"
	"testing"
	"time"

	"pisess/readers/payload"
	"pisess/writers/wire"
)

func TestProf2(t *testing.T) {
	p := os.Getenv("PROF")
	if p == "" {
		t.Skip()
	}
	f, _ := os.Open(p)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var lines [][]byte
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	t0 := time.Now()
	for _, l := range lines {
		wire.ParseJSON(l, nil)
	}
	t.Logf("parse %v", time.Since(t0))
	t0 = time.Now()
	for _, l := range lines[1:] {
		payload.Decode(l)
	}
	t.Logf("decode %v", time.Since(t0))
	t0 = time.Now()
	for _, l := range lines[1:] {
		v, _ := wire.ParseJSON(l, nil)
		wire.AppendCompact(nil, v)
	}
	t.Logf("parse+compact %v", time.Since(t0))
}
