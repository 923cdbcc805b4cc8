package rollback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"pisess/ledger"
	"pisess/readers/discover"
)

// TreeSession is one session of a rollback by correlation id over trees
// ([InTrees]), as its report shows it.
type TreeSession struct {
	Tree    string `json:"tree"`
	Session string `json:"session"`
	Action  string `json:"action"`
	Detail  string `json:"detail,omitempty"`
	Changed bool   `json:"changed"`
	Stale   bool   `json:"stale,omitempty"`
	Error   string `json:"error,omitempty"`
}

// TreeForged is a journal line of the run refused as forged or corrupt:
// reported, never acted on.
type TreeForged struct {
	Tree    string `json:"tree"`
	Journal string `json:"journal"`
	Line    int64  `json:"line"`
	Detail  string `json:"detail"`
}

// TreesResult is what [InTrees] did.
type TreesResult struct {
	Sessions []TreeSession
	Forged   []TreeForged
	// Known is set when some tree's journal knows the correlation id.
	Known bool
}

// InTrees undoes the run correlationID ([ByCorrelation]) in every tree
// named by roots (any path inside a tree names that tree), under each
// tree's lock, taken after a wait of up to lockWait for another run that
// holds it (none in a dry run, which changes nothing). A tree without a
// journal is skipped untouched (not even .pisess/ is created for the
// lock), as is one whose journal does not know the id. The locks are held
// until it returns. On an error the result holds the trees done before.
func InTrees(ctx context.Context, roots []string, correlationID string, opt Options, lockWait time.Duration) (TreesResult, error) {
	var res TreesResult
	for _, root := range roots {
		// The journal names sessions by absolute path: so must the tree.
		if abs, err := filepath.Abs(root); err == nil {
			root = abs
		}
		// Any path inside a tree names that tree's one journal (issue 12).
		tree := discover.TreeRoot(root)
		if err := ledger.CheckPisessDir(tree); err != nil {
			return res, err
		}
		if _, err := os.Lstat(ledger.JournalPath(tree)); err != nil {
			// No journal, no run to undo: nothing is created (not even
			// .pisess/ for the lock) in a tree pisess never changed.
			continue
		}
		opt.Hold = nil
		if !opt.DryRun {
			l, _, err := ledger.LockTreeWait(ctx, opt.Ops, tree, lockWait)
			if err != nil {
				return res, fmt.Errorf("lock tree %s: %w", tree, err)
			}
			defer l.Unlock()
			opt.Hold = ledger.Hold(l, correlationID)
		}
		r, err := ByCorrelation(ctx, tree, correlationID, opt)
		switch {
		case errors.Is(err, ErrUnknownCorrelation):
			continue
		case errors.Is(err, ErrBadCorrelationID):
			return res, err
		case err != nil:
			return res, fmt.Errorf("rollback %s in %s: %w", correlationID, tree, err)
		}
		res.Known = true
		for _, b := range r.Forged {
			res.Forged = append(res.Forged, TreeForged{Tree: tree, Journal: ledger.JournalPath(tree), Line: b.Line, Detail: b.Detail})
		}
		for _, s := range r.Sessions {
			rs := TreeSession{Tree: tree, Session: s.Session, Action: string(s.Action), Detail: s.Detail, Changed: s.Changed, Stale: s.Stale}
			if s.Error != nil {
				rs.Error = s.Error.Error()
			}
			res.Sessions = append(res.Sessions, rs)
		}
	}
	return res, nil
}
