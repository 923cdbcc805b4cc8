package engine

import (
	"context"

	"github.com/rs/zerolog"

	"pisess/readers/discover"
	"pisess/rollback"
)

// HealReport is what a migrate run did about the leftovers of an
// interrupted run before planning (rollback.Heal).
type HealReport = rollback.HealReport

// heal repairs what an interrupted run left in tree t before migrate plans
// it, as fsck --repair would (rollback.Heal), rebuilding through the
// migrate pipeline. The caller holds the tree lock. nil when there was
// nothing to do.
func heal(ctx context.Context, log zerolog.Logger, opt MigrateOptions, t discover.Tree, stale string, hold func() error) (*HealReport, error) {
	r := &rollback.Fsck{LockTimeout: opt.LockTimeout, Clock: opt.Clock, Ops: opt.Ops, Log: &log}
	r.Rebuild = FsckRebuild(r)
	return rollback.Heal(ctx, r, t, stale, hold)
}
