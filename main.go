// Command pisess migrates, verifies, repairs and rolls back session stores of
// the pi coding agent into Session Store V2 sidecars. Everything but the
// process boundary lives in package commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"pisess/commands"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := commands.Main(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
