package commands

import (
	"os"
	"time"

	"pisess/commands/engine"
)

// EnvClock names the variable that fixes every time pisess writes (frame
// timestamps, manifest createdAt/updatedAt, ledger and checkpoint times), so
// that a store can be reproduced byte for byte.
const EnvClock = "PISESS_CLOCK"

// ClockFromEnv returns the clock every writing command uses: the fixed
// instant in $PISESS_CLOCK (RFC 3339, e.g. 2026-01-01T00:00:00.000Z) when it
// is set, else the wall clock. An unparsable value is a *engine.UsageError:
// silently falling back to the wall clock would make a "reproducible" run
// quietly not reproducible.
func ClockFromEnv() (func() time.Time, error) {
	v, ok := os.LookupEnv(EnvClock)
	if !ok || v == "" {
		return func() time.Time { return time.Now().UTC() }, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, engine.Usagef("%s=%q is not an RFC 3339 time such as 2026-01-01T00:00:00.000Z", EnvClock, v)
	}
	t = t.UTC()
	return func() time.Time { return t }, nil
}
