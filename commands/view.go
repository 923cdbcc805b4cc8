package commands

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dustin/go-humanize"

	"pisess/readers/discover"
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

// relText rewrites, in a message meant for people (a finding's detail, an
// error, a rollback's account), every path inside one of trees as a path
// relative to it, as relTo does for a path alone: text reports are
// tree-relative; --json keeps the exact paths. Only a root followed by a
// separator is rewritten, so /t/a is not taken for a path inside /t/ab.
func relText(trees []string, s string) string {
	roots := make([]string, 0, len(trees))
	for _, t := range trees {
		if t = filepath.Clean(t); t != string(filepath.Separator) && t != "." {
			roots = append(roots, t)
		}
	}
	// The longest first: a tree nested in another is the nearer one.
	sort.Slice(roots, func(i, j int) bool { return len(roots[i]) > len(roots[j]) })
	for _, t := range roots {
		s = strings.ReplaceAll(s, t+string(filepath.Separator), "")
	}
	return s
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
		fmt.Fprintf(w, "notice: %s: skipped, %s: %s\n", relTo(trees, e.Path), strings.ReplaceAll(string(e.Kind), "_", " "), relText(trees, e.Reason))
	}
}
