// Command pisess migrates, verifies, repairs and rolls back session stores of
// the pi coding agent into Session Store V2 sidecars. Everything but the
// process boundary lives in package commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"pisess/commands"
)

func main() {
	adviseHugePages(os.Args) // first, while the heap is a few hundred kilobytes
	// A run keeps a few megabytes live and allocates per entry: collecting
	// at 5× the live heap rather than 2× cuts the collector's share of a
	// migration by about a seventh (scripts/bench). The soft memory limit
	// follows the live heap (memlimit.go), so that the growth GOGC=400
	// allows stays within 64 MiB of RSS. GOGC and GOMEMLIMIT from the
	// environment still win.
	// One P more than the CPUs (GOMAXPROCS from the environment still
	// wins): a goroutine in a system call keeps its P until the runtime's
	// monitor hands it on, and pisess's calls block often and briefly (a
	// syncfs, an unlink on a file system mounted with discard, a write held
	// up by the journal), while the CPUs have room for the Go work that
	// waits for a P. A steady refresh, median of 10 alternating runs: 0.40
	// -> 0.37 s; a full migration not slower (issue 14, scripts/bench).
	runtime.GOMAXPROCS(procsFor(os.Getenv("GOMAXPROCS"), runtime.GOMAXPROCS(0)))
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		done := make(chan struct{})
		defer close(done)
		go followLiveHeap(done)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfiling := startProfiling()
	code := commands.Main(ctx, os.Args, os.Stdout, os.Stderr)
	stopProfiling()
	stop()
	os.Exit(code)
}

// procsFor is the number of Ps for a run: the runtime's (current) plus
// one, unless the environment set GOMAXPROCS (env).
func procsFor(env string, current int) int {
	if env != "" {
		return current
	}
	return current + 1
}
