package commands

import "github.com/urfave/cli/v2"

// lockWaitFlag is --lock-wait, shared by the commands that take the tree
// lock to change a tree.
func lockWaitFlag() cli.Flag {
	return &cli.DurationFlag{Name: "lock-wait", Value: 0,
		Usage: "wait up to this long (such as 5m) for a tree lock another pisess run holds, instead of exiting 32 at once"}
}
