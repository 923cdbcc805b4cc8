package commands

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// retentionUnits are the units of a retention window (prune --keep-within),
// as restic's --keep-within writes them, plus weeks. Months and years have
// fixed lengths, not calendar ones: a window is the same length whatever
// the date it is measured from, so a dry run and the run after it agree,
// and "1m" never means February's 28 days one month and 31 the next.
var retentionUnits = []struct {
	unit string
	d    time.Duration
	name string
}{
	{"y", 365 * 24 * time.Hour, "year (365 days)"},
	{"m", 30 * 24 * time.Hour, "month (30 days)"},
	{"w", 7 * 24 * time.Hour, "week"},
	{"d", 24 * time.Hour, "day (24 hours)"},
	{"h", time.Hour, "hour"},
}

// retentionHelp says what parseRetention takes, for --help and errors.
const retentionHelp = "a number and a unit, repeated: y (365 days), m (month: 30 days), w (week), d (day), h (hour), such as 30d, 2w, 1y2m or 720h"

// parseRetention reads a retention window such as 30d, 2w, 1y2m or 720h:
// one or more numbers each followed by a unit of retentionUnits. "m" is a
// month, as in restic, not a minute: a window of minutes has no use here.
func parseRetention(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty: want %s", retentionHelp)
	}
	var total time.Duration
	rest := s
	for rest != "" {
		i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if i <= 0 {
			return 0, fmt.Errorf("%q: want %s", s, retentionHelp)
		}
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", s, err)
		}
		rest = rest[i:]
		var unit time.Duration
		for _, u := range retentionUnits {
			if strings.HasPrefix(rest, u.unit) {
				unit = u.d
				rest = rest[len(u.unit):]
				break
			}
		}
		if unit == 0 {
			return 0, fmt.Errorf("%q: want %s", s, retentionHelp)
		}
		if n > int64(math.MaxInt64-total)/int64(unit) {
			return 0, fmt.Errorf("%q: too long", s)
		}
		total += time.Duration(n) * unit
	}
	if total <= 0 {
		return 0, fmt.Errorf("%q: want more than nothing, %s", s, retentionHelp)
	}
	return total, nil
}
