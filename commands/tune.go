package commands

import "pisess/commands/tune"

// Tune turns the runtime's knobs (package tune: the collector's settings,
// the profiles of a profile build) and returns what ends them; main calls
// it first (a migration takes its extra P itself).
func Tune() (stop func()) { return tune.Start() }
