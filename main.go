//go:build !windows

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
	adviseHugePages(os.Args) // first, while the heap is a few hundred kilobytes
	// A run keeps a few megabytes live and allocates per entry: collecting
	// at 5× the live heap rather than 2× cuts the collector's share of a
	// migration by about a seventh (scripts/bench). The soft memory limit
	// follows the live heap (memlimit.go), so that the growth GOGC=400
	// allows stays within 64 MiB of RSS. GOGC and GOMEMLIMIT from the
	// environment still win.
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
