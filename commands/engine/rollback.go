package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/rollback"
	"pisess/writers/durable"
)

// RollbackOptions configure Rollback.
type RollbackOptions struct {
	// CorrelationID is the run to undo (by-correlation mode).
	CorrelationID string
	// Trees are the session trees whose journals are read; none: the
	// default tree.
	Trees []string
	// Store and Checkpoint select the rollback of one store to one of its
	// checkpoints (Checkpoint > 0).
	Store       string
	Checkpoint  uint64
	DryRun      bool
	LockTimeout time.Duration
	// LockWait is how long to wait for a tree lock another run holds
	// (--lock-wait); 0: exit 32 at once.
	LockWait time.Duration
	Clock    func() time.Time
	Ops      durable.Ops
}

// RollbackSession is one session of a rollback by correlation id.
type RollbackSession = rollback.TreeSession

// RollbackForged is a journal line of the run refused as forged or
// corrupt: reported, never acted on.
type RollbackForged = rollback.TreeForged

// RollbackReport is the result of Rollback.
type RollbackReport struct {
	CorrelationID string            `json:"correlationId,omitempty"`
	DryRun        bool              `json:"dryRun"`
	Sessions      []RollbackSession `json:"sessions,omitempty"`
	Forged        []RollbackForged  `json:"forged,omitempty"`
	// Unknown is set when no tree's journal knows the correlation id.
	Unknown    string           `json:"unknown,omitempty"`
	Checkpoint *rollback.Result `json:"checkpoint,omitempty"`
}

// Tally implements Report: sessions left not rolled back, or an unknown id.
func (r RollbackReport) Tally() Tally {
	n := 0
	for _, s := range r.Sessions {
		if s.Error != "" {
			n++
		}
	}
	if r.Unknown != "" {
		n++
	}
	return Tally{Problems: n + len(r.Forged)}
}

// Rollback undoes a migrate (or upgrade) run by its correlation id in every
// tree given, under each tree's lock, or rolls one store back to a
// checkpoint. A malformed correlation id is a usage error; one that no
// journal knows is reported as a problem (exit 4).
func Rollback(ctx context.Context, opt RollbackOptions) (RollbackReport, error) {
	if opt.LockTimeout == 0 {
		opt.LockTimeout = DefaultLockTimeout
	}
	ropt := rollback.Options{DryRun: opt.DryRun, LockTimeout: opt.LockTimeout, Ops: opt.Ops, Clock: opt.Clock}
	if opt.Checkpoint > 0 {
		if opt.Store == "" {
			return RollbackReport{}, Usagef("--to-checkpoint needs the STORE directory")
		}
		res, err := rollback.ToCheckpoint(ctx, opt.Store, opt.Checkpoint, ropt)
		if err != nil {
			if errors.Is(err, rollback.ErrNoCheckpoint) {
				return RollbackReport{}, Usagef("%v", err)
			}
			return RollbackReport{DryRun: opt.DryRun}, fmt.Errorf("rollback %s to checkpoint %d: %w", opt.Store, opt.Checkpoint, err)
		}
		return RollbackReport{DryRun: opt.DryRun, Checkpoint: &res}, nil
	}
	if !ledger.ValidCorrelationID(opt.CorrelationID) {
		return RollbackReport{}, Usagef("correlation id %q is malformed: want 8 to 128 characters of A-Z a-z 0-9 . _ : -", opt.CorrelationID)
	}
	rep := RollbackReport{CorrelationID: opt.CorrelationID, DryRun: opt.DryRun}
	roots := opt.Trees
	if len(roots) == 0 {
		var err error
		if roots, err = discover.DefaultRoots(); err != nil {
			return rep, fmt.Errorf("default session tree: %w", err)
		}
	}
	res, err := rollback.InTrees(ctx, roots, opt.CorrelationID, ropt, opt.LockWait)
	rep.Sessions, rep.Forged = res.Sessions, res.Forged
	if errors.Is(err, rollback.ErrBadCorrelationID) {
		return rep, Usagef("%v", err)
	} else if err != nil {
		return rep, err
	}
	if !res.Known {
		rep.Unknown = fmt.Sprintf("no journal under %v knows correlation id %s", roots, opt.CorrelationID)
	}
	return rep, nil
}
