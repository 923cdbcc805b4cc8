package upgrade

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"pisess/readers"
)

// Session is one session file of a tree, as discovery found it.
type Session struct {
	Path   string
	Format readers.SourceFormat
}

// TreeOptions say how to upgrade the sessions of one tree (Tree).
type TreeOptions struct {
	// Options are every session's; LockTimeout is the wait for a session
	// pi holds (see Tree). Tree, QuarantinePath and Record come from
	// Begin's prepare.
	Options
	// Begin is called once, before the first session, when some session
	// needs an upgrade and this is not a dry run: it takes what changing
	// the tree needs (Run: the tree lock, the journal and the run's
	// start record) and returns prepare, which completes the Options of
	// the session sessions[k], and end, called once with the tree's
	// totals when Tree returns. An error from Begin is Tree's, nothing
	// upgraded.
	Begin func() (prepare func(k int, o *Options), end func(Totals), err error)
	// Log gets one line per session (a warning for a problem).
	Log zerolog.Logger
}

// Tree upgrades sessions, one tree's, in order (Upgrade), and returns
// their results in the same order. A session whose version settles it
// (Settled) is not opened. Each session lock is tried once first; the
// sessions pi holds are waited for (up to LockTimeout each) after all the
// others, which they would otherwise hold up in turn. An error means the
// run stopped (Begin failed, or ctx was cancelled); the results so far
// are returned with it.
func Tree(ctx context.Context, sessions []Session, opt TreeOptions) ([]Result, error) {
	versions := make([]PiVersion, len(sessions)) // the header versions pi gives the JSONL sessions
	need := false
	for k, s := range sessions {
		if s.Format == readers.FormatJSONLv3 {
			versions[k] = SniffVersion(s.Path)
			need = need || versions[k].Legacy()
		}
	}
	prepare := func(int, *Options) {}
	out := make([]Result, 0, len(sessions))
	if !opt.DryRun && need && opt.Begin != nil {
		p, end, err := opt.Begin()
		if err != nil {
			return out, err
		}
		prepare = p
		defer func() { end(Count(out)) }()
	}
	first := opt.Options
	first.LockTimeout = 0
	var held []int // indexes in sessions of the sessions found locked
	for k, s := range sessions {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("upgrade interrupted: %w", err)
		}
		res, err := upgradeSession(ctx, first, k, s, versions[k], prepare)
		out = append(out, *res)
		if err == nil && res.Status == StatusBusy {
			held = append(held, k)
			continue
		}
		if err := logResult(opt.Log, res, err); err != nil {
			return out, err
		}
	}
	for _, k := range held {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("upgrade interrupted: %w", err)
		}
		res, err := upgradeSession(ctx, opt.Options, k, sessions[k], versions[k], prepare)
		out[k] = *res
		if err := logResult(opt.Log, res, err); err != nil {
			return out, err
		}
	}
	return out, nil
}

// upgradeSession upgrades one session (Upgrade), its options completed by
// prepare, unless its version settles it (Settled).
func upgradeSession(ctx context.Context, opt Options, k int, s Session, pv PiVersion, prepare func(int, *Options)) (*Result, error) {
	if res, ok := Settled(s.Path, s.Format, pv); ok {
		return res, nil
	}
	if !opt.DryRun {
		prepare(k, &opt)
	}
	return Upgrade(ctx, s.Path, opt)
}

// logResult logs a session's result; err, when set, interrupted it.
func logResult(log zerolog.Logger, res *Result, err error) error {
	ev := log.Info()
	if res.Status != StatusUpgraded && res.Status != StatusPlanned && res.Status != StatusCurrent {
		ev = log.Warn()
	}
	ev.Str("session", res.Path).Str("status", string(res.Status)).Msg("upgrade")
	if err != nil {
		return fmt.Errorf("upgrade interrupted: %w", err)
	}
	return nil
}
