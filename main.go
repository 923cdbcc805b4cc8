// Command pisess migrates, verifies, repairs and rolls back session stores of
// the pi coding agent into Session Store V2 sidecars. Everything but the
// process boundary lives in package commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"pisess/commands"
)

func main() {
	// A run keeps a few megabytes live and allocates per entry: collecting
	// at 5× the live heap rather than 2× cuts the collector's share of a
	// migration by about a seventh (scripts/bench). The soft limit caps
	// what that costs when one huge session keeps much more live: a
	// 1,000,000-entry session peaks at ~53 MB live and runs in ~140 MB.
	// A lower limit trades time for memory (GOMEMLIMIT=64MiB: ~80 MB, but
	// 1.5× the time to migrate it and 3.5× to verify it, the collector
	// running all the while). GOGC and GOMEMLIMIT from the environment
	// still win.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(128 << 20)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfiling := startProfiling()
	code := commands.Main(ctx, os.Args, os.Stdout, os.Stderr)
	stopProfiling()
	stop()
	os.Exit(code)
}
