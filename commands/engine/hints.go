package engine

import (
	"path/filepath"
	"strings"

	"pisess/ledger"
	"pisess/readers/discover"
)

// isDefaultTree reports whether tree is the default session tree, which
// commands use when given no path.
func isDefaultTree(tree string) bool {
	roots, err := discover.DefaultRoots()
	if err != nil {
		return false
	}
	for _, r := range roots {
		if abs, err := filepath.Abs(r); err == nil && abs == tree {
			return true
		}
	}
	return false
}

// treeArgs is the --tree flags a command needs to reach trees: none for
// the default tree alone.
func treeArgs(trees []string) string {
	var b strings.Builder
	for _, t := range trees {
		if len(trees) == 1 && isDefaultTree(t) {
			return ""
		}
		b.WriteString(" --tree ")
		b.WriteString(ledger.ShellQuote(t))
	}
	return b.String()
}

// RollbackHint is the command that undoes run id over trees, with the
// --tree flags it needs to find their journals (issue 12: a printed hint
// must work as printed).
func RollbackHint(id string, trees []string) string {
	return "pisess rollback" + treeArgs(trees) + " " + id
}

// RepairHint is the fsck --repair command line for trees.
func RepairHint(trees []string) string {
	if len(trees) == 1 && isDefaultTree(trees[0]) {
		return "pisess fsck --repair"
	}
	var b strings.Builder
	b.WriteString("pisess fsck --repair")
	for _, t := range trees {
		b.WriteString(" ")
		b.WriteString(ledger.ShellQuote(t))
	}
	return b.String()
}
