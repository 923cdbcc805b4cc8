package commands

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/writers/wire"
)

// Every numeric flag has bounds, checked before a command does anything,
// whether the value came from the command line or from the environment (a
// crontab's PISESS_JOBS=99999999999 once grew pisess to 2.5 GB and held
// the tree lock for a quarter of an hour). The error names what to fix:
// the flag, or the variable and its value.

// MaxJobs bounds --jobs: more sessions at once than this only adds memory
// and contention on any machine pisess runs on.
const MaxJobs = 256

// Bounds of the lock waits: a session lock is waited for while the tree
// lock is held, so its wait is short; a tree lock is waited for holding
// nothing, at most a day (the longest period a cron job has).
const (
	MaxLockTimeout = time.Hour
	MaxLockWait    = 24 * time.Hour
	// MaxKeepWithin is a century: longer is "keep everything", which a
	// prune that is not run says better.
	MaxKeepWithin = 100 * 365 * 24 * time.Hour
	// MinSegmentBytes keeps a store to a sane number of files: with
	// smaller segments, every frame would be a file of its own.
	MinSegmentBytes = 4096
)

// bound is the range of one numeric flag.
type bound struct {
	min, max int64
	duration bool   // the values are time.Durations
	zero     string // what 0 means, when it means something
}

// flagBounds are the bounds of every numeric flag, by name.
var flagBounds = map[string]bound{
	"jobs":              {min: 0, max: MaxJobs, zero: "the number of CPUs"},
	"max-segment-bytes": {min: MinSegmentBytes, max: wire.MaxSegmentBytes},
	"lock-timeout":      {min: 0, max: int64(MaxLockTimeout), duration: true, zero: "the default"},
	"lock-wait":         {min: 0, max: int64(MaxLockWait), duration: true, zero: "no wait"},
	"keep-within":       {min: 0, max: int64(MaxKeepWithin), duration: true},
}

func (b bound) show(v int64) string {
	if b.duration {
		// 1h, 24h, 1h30m: as people write them.
		d := time.Duration(v).String()
		if strings.HasSuffix(d, "m0s") {
			d = strings.TrimSuffix(d, "0s")
		}
		if strings.HasSuffix(d, "h0m") {
			d = strings.TrimSuffix(d, "0m")
		}
		return d
	}
	return strconv.FormatInt(v, 10)
}

// applyBounds adds each numeric flag's range to its help.
func applyBounds(app *cli.App) {
	for _, c := range app.Commands {
		for _, f := range c.Flags {
			b, ok := flagBounds[f.Names()[0]]
			if !ok {
				continue
			}
			note := fmt.Sprintf(" (%s to %s)", b.show(b.min), b.show(b.max))
			switch f := f.(type) {
			case *cli.IntFlag:
				f.Usage += note
			case *cli.Int64Flag:
				f.Usage += note
			case *cli.DurationFlag:
				f.Usage += note
			case *cli.StringFlag:
				f.Usage += note
			}
		}
	}
}

// checkBounds refuses a numeric flag out of its range (usage, 16), naming
// the variable when the value came from the environment.
func (r *run) checkBounds(c *cli.Context) error {
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		b, ok := flagBounds[name]
		if !ok || !c.IsSet(name) {
			continue
		}
		var v int64
		switch x := c.Value(name).(type) {
		case int:
			v = int64(x)
		case int64:
			v = x
		case time.Duration:
			v = int64(x)
		case string:
			// --keep-within takes days, weeks, months and years
			// (parseRetention); a value it cannot parse is the
			// command's own usage error.
			d, err := parseRetention(x)
			if !b.duration || err != nil {
				continue
			}
			v = int64(d)
		default:
			continue
		}
		if v >= b.min && v <= b.max {
			continue
		}
		what := "--" + name + " " + b.show(v)
		if env := flagEnv(r.argv, f); env != "" {
			what = env + "=" + os.Getenv(env)
		}
		zero := ""
		if b.zero != "" && b.min == 0 {
			zero = fmt.Sprintf("; 0 means %s", b.zero)
		}
		if v > b.max {
			return engine.Usagef("%s: above the maximum of %s (want %s to %s%s)", what, b.show(b.max), b.show(b.min), b.show(b.max), zero)
		}
		return engine.Usagef("%s: below the minimum of %s (want %s to %s%s)", what, b.show(b.min), b.show(b.min), b.show(b.max), zero)
	}
	return nil
}
