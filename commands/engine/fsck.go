package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"pisess/commands/tune"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/rollback"
	"pisess/verify"
	"pisess/writers/durable"
)

// DefaultLockTimeout is how long a command waits for a session lock or a
// store mutation lock that pi holds before it reports the session busy.
const DefaultLockTimeout = rollback.DefaultLockTimeout

// FsckOptions configure Fsck. Repair, LockTimeout (0: DefaultLockTimeout),
// LockWait (--lock-wait; 0: exit 32 at once), Clock (nil: the wall
// clock), Ops and Progress are rollback.Fsck's.
type FsckOptions struct {
	// Paths are session files or trees; none means discover.DefaultRoots.
	Paths  []string
	Repair bool
	// Jobs is how many sessions are checked (and repaired) at once; 0
	// means the number of CPUs the process may use (tune.CPUs).
	Jobs int
	// CorrelationID is the run's id for --repair (journal notes, the
	// quarantine directory); "" generates one.
	CorrelationID string
	LockTimeout   time.Duration
	LockWait      time.Duration
	Clock         func() time.Time
	Ops           durable.Ops
	Progress      func(done, total int)
}

// Fsck checks every session under opt.Paths the way e2fsck checks a file
// system, tree by tree under each tree's lock, and with opt.Repair mends
// what can be mended and checks again (rollback.Fsck says what it finds
// and how it repairs; the rebuilds go through the migrate pipeline).
//
// The report's Tally gives the exit status (package commands, exit.go; the
// values are fsck --help's): 0 clean, 1 problems found and all repaired, 4
// problems left, never combined as bits. An error means fsck could not
// run: ErrTreeLocked in its chain (exit 32) when another pisess run holds
// a tree's lock, anything else exit 8. Notices do not count: a source the
// reference refuses (pi keeps using it as JSONL), a stale sidecar (pi reads
// the session file until a refresh; verify.FsckFinding's Notice).
func Fsck(ctx context.Context, opt FsckOptions) (FsckReport, error) {
	roots := opt.Paths
	if len(roots) == 0 {
		var err error
		if roots, err = discover.DefaultRoots(); err != nil {
			return FsckReport{}, err
		}
	}
	trees, err := discover.Walk(roots)
	if err != nil {
		return FsckReport{}, fmt.Errorf("fsck: %w", err)
	}
	r := &rollback.Fsck{Repair: opt.Repair, Jobs: opt.Jobs, LockTimeout: opt.LockTimeout, LockWait: opt.LockWait,
		Clock: opt.Clock, Ops: opt.Ops, Log: zerolog.Ctx(ctx), Progress: opt.Progress}
	if r.Jobs <= 0 {
		r.Jobs = tune.CPUs()
	}
	r.Rebuild = fsckRebuild(r)
	rep := FsckReport{Repair: opt.Repair}
	if opt.Repair {
		rep.CorrelationID = opt.CorrelationID
		if rep.CorrelationID == "" {
			rep.CorrelationID = ledger.NewCorrelationID()
		} else if !ledger.ValidCorrelationID(rep.CorrelationID) {
			return FsckReport{}, Usagef("correlation id %q does not match ^[A-Za-z0-9._:-]{8,128}$", rep.CorrelationID)
		}
		r.CorrelationID = rep.CorrelationID
	}
	rep.Trees, err = r.Run(ctx, trees)
	rep.Totals = verify.SumFsck(rep.Trees)
	return rep, err
}

// FsckReport is what Fsck found and, with Repair, did.
type FsckReport struct {
	// CorrelationID is the run's id, which every journal note of its
	// repairs carries and the quarantine directory is named after; "" for
	// a check without --repair (which writes nothing).
	CorrelationID string            `json:"correlationId,omitempty"`
	Repair        bool              `json:"repair"`
	Trees         []verify.FsckTree `json:"trees"`
	Totals        verify.FsckTotals `json:"totals"`
}

// Tally counts the problems (notices excluded) and those repaired.
func (r FsckReport) Tally() Tally {
	return Tally{Problems: r.Totals.Problems, Repaired: r.Totals.Repaired}
}
