package commands

import (
	"path/filepath"
	"strings"

	"pisess/ledger"
)

// The commands a report prints for the operator to run always name their
// trees, absolute and shell-quoted: a hint is pasted into another shell
// (another directory, another HOME, no PI_SESSIONS_DIR: root's, reading
// cron's mail), where "the default tree" is another tree or none (issue
// 34 §3: `pisess fsck --repair` printed for the default tree exited 8
// there).

// absTree is tree as an absolute path ("" stays "": no tree).
func absTree(tree string) string {
	if abs, err := filepath.Abs(tree); err == nil {
		return abs
	}
	return tree
}

// treeArgs is the --tree flags a command needs to reach trees.
func treeArgs(trees []string) string {
	var b strings.Builder
	for _, t := range trees {
		b.WriteString(" --tree ")
		b.WriteString(ledger.ShellQuote(absTree(t)))
	}
	return b.String()
}

// rollbackHint is the command that undoes run id over trees, with the
// --tree flags it needs to find their journals (issue 12: a printed hint
// must work as printed).
func rollbackHint(id string, trees []string) string {
	return "pisess rollback" + treeArgs(trees) + " " + id
}

// repairHint is the fsck --repair command line for trees.
func repairHint(trees []string) string {
	var b strings.Builder
	b.WriteString("pisess fsck --repair")
	for _, t := range trees {
		b.WriteString(" ")
		b.WriteString(ledger.ShellQuote(absTree(t)))
	}
	return b.String()
}
