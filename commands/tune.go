package commands

import "pisess/commands/tune"

// Tune starts what pisess asks of the runtime (package tune: the soft
// memory limit, a profile build's profiles) and returns what ends it; main
// calls it first.
func Tune(args []string) (stop func()) { return tune.Start(args) }
