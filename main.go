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
	stopTuning := commands.Tune() // first, so that the collector's settings hold for the whole run
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := commands.Main(ctx, os.Args, os.Stdout, os.Stderr)
	stopTuning()
	stop()
	commands.Exit(code)
}
