package engine

import (
	"context"
	"time"

	"pisess/rollback"
)

// rollbackTree undoes run cid in tree as pisess rollback does
// (rollback.InTrees, no wait for the tree lock); clock nil: the wall clock.
func rollbackTree(ctx context.Context, tree, cid string, clock func() time.Time) (rollback.TreesResult, error) {
	return rollback.InTrees(ctx, []string{tree}, cid, rollback.Options{Clock: clock}, 0)
}

// rollbackProblems is what the rollback's report counts as problems left:
// sessions not rolled back, forged journal lines, and an id no journal
// knows.
func rollbackProblems(res rollback.TreesResult) int {
	n := len(res.Forged)
	for _, s := range res.Sessions {
		if s.Error != "" {
			n++
		}
	}
	if !res.Known {
		n++
	}
	return n
}
