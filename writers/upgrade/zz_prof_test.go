package upgrade

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestProf(t *testing.T) {
	p := os.Getenv("PROF")
	if p == "" {
		t.Skip()
	}
	f, _ := os.Open(p)
	t0 := time.Now()
	s := newScanner(context.Background(), f)
	pl, err := scanPlan(s)
	t.Logf("pass1 %v %v entries=%d", time.Since(t0), err, pl.entries)
	res := run(t, p, Options{DryRun: true})
	t.Logf("all %v %s", time.Since(t0), res.Status)
}
