//go:build !windows

package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"pisess/commands"
)

func main() {
	stopTuning := commands.Tune(os.Args) // first, while the heap is a few hundred kilobytes
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := commands.Main(ctx, os.Args, os.Stdout, os.Stderr)
	stopTuning()
	stop()
	commands.Exit(code)
}
