package commands

import "pisess/commands/tune"

// Tune starts what the command line args ask of the runtime (package tune:
// the profiles of a profile build) and returns what ends it; main calls it
// first.
func Tune(args []string) (stop func()) { return tune.Start(args) }
