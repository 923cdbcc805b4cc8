package commands

import (
	"fmt"
	"io"

	"path/filepath"
	"pisess/readers/discover"
	"strings"

	"github.com/dustin/go-humanize"
)

// view is how much a text report shows, for the operator reading it:
//
//   - quiet (-q): only what needs the operator's action, and nothing at all
//     when nothing does (Main prints no report for exit 0): cron mails only
//     when there is something to do;
//   - default: problems first, then notices, then a summary; items with
//     nothing to report are counted, not listed;
//   - verbose (-v): every item.
type view struct {
	quiet, verbose bool
}

// relTo shows path relative to the tree that holds it (the longest of
// trees), or as it is when none does.
func relTo(trees []string, path string) string {
	best := ""
	for _, t := range trees {
		if (path == t || strings.HasPrefix(path, t+string(filepath.Separator))) && len(t) > len(best) {
			best = t
		}
	}
	if best == "" {
		return path
	}
	rel, err := filepath.Rel(best, path)
	if err != nil {
		return path
	}
	return rel
}

// size is a byte count for people (exact numbers are in --json).
func size[N int64 | uint64](n N) string {
	if n < 0 {
		n = 0
	}
	return humanize.IBytes(uint64(n))
}

// renderSkipped prints the entries that are not sessions as notices (not
// with -q: they need no action), the same way in every command.
func renderSkipped(w io.Writer, trees []string, sk []discover.Skipped, v view) {
	if v.quiet {
		return
	}
	for _, e := range sk {
		fmt.Fprintf(w, "notice: %s: skipped, %s: %s\n", relTo(trees, e.Path), strings.ReplaceAll(string(e.Kind), "_", " "), e.Reason)
	}
}
