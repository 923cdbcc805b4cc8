package engine

import (
	"context"
	"errors"
	"time"

	"pisess/writers/durable"
)

// lockAside takes the lock at path: one try, and when another process (pi)
// holds it, a wait of up to timeout run through aside, which gives up the
// caller's place in its pool meanwhile (Env.aside, treeRun.aside), so that
// the sessions queued behind this one are not held up by it.
func lockAside(ctx context.Context, ops durable.Ops, path string, timeout time.Duration, aside func(wait func())) (*durable.Lock, error) {
	l, err := ops.LockFile(ctx, path, 0)
	if errors.Is(err, durable.ErrLockTimeout) && timeout > 0 {
		aside(func() { l, err = ops.LockFile(ctx, path, timeout) })
	}
	return l, err
}

// waitWithout runs wait with one of places given up meanwhile, and takes a
// place again after it (queued behind those who asked first).
func waitWithout(places chan struct{}, wait func()) {
	<-places
	handOver()
	wait()
	places <- struct{}{}
}
