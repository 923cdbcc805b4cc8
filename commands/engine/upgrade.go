package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"pisess/ledger"
	"pisess/readers"
	"pisess/readers/discover"
	"pisess/writers/durable"
	"pisess/writers/upgrade"
	"pisess/writers/wire"
)

// UpgradeOptions configure Upgrade.
type UpgradeOptions struct {
	// Paths are session files or trees; none means discover.DefaultRoots.
	Paths  []string
	DryRun bool
	// CorrelationID is the run's id (journal notes, quarantine); "" makes
	// a new one.
	CorrelationID string
	// LockTimeout bounds the wait for each session lock; 0 means
	// DefaultLockTimeout.
	LockTimeout time.Duration
	// LockWait is how long to wait for a tree lock another run holds
	// (--lock-wait); 0: exit 32 at once.
	LockWait time.Duration
	// Clock stamps journal notes; nil means the wall clock.
	Clock func() time.Time
	// Ops performs the file operations; the zero value is durable.OS.
	Ops durable.Ops
}

// UpgradeReport is the result of Upgrade: one upgrade.Result per session
// found, in discovery order.
type UpgradeReport struct {
	CorrelationID string           `json:"correlationId"`
	DryRun        bool             `json:"dryRun"`
	Trees         []string         `json:"trees"`
	Files         []upgrade.Result `json:"files"`
	Totals        upgrade.Totals   `json:"totals"`
	// Skipped are entries discovery did not take as sessions.
	Skipped []discover.Skipped `json:"skippedEntries,omitempty"`
}

// Tally implements Report. Refused, busy, changed and failed files are
// problems left (exit 4, as migrate counts its sessions); an upgrade is
// not a repair, so a run that upgraded everything exits 0. A file the
// reference still cannot migrate after its upgrade is not a problem of
// the upgrade: migrate will refuse it and say why.
func (r UpgradeReport) Tally() Tally {
	t := r.Totals
	return Tally{Problems: t.Refused + t.Busy + t.Changed + t.Failed}
}

// Upgrade rewrites every version 1 or 2 JSONL session under opt.Paths as
// version 3 (writers/upgrade), under each tree's lock and each session's
// lock, quarantining each original and recording an upgraded note in the
// tree journal, so that `pisess rollback <correlation id>` restores it.
// Sessions that are version 3 are reported as such without being opened;
// SQLite sessions are skipped. A dry run takes no tree lock and writes
// nothing anywhere. Errors mean the run could not run (bad option, tree
// lock held, unreadable tree, interrupted); per-file problems are in the
// report.
func Upgrade(ctx context.Context, opt UpgradeOptions) (UpgradeReport, error) {
	if err := checkUpgradeOptions(&opt); err != nil {
		return UpgradeReport{}, err
	}
	log := zerolog.Ctx(ctx).With().Str("correlationId", opt.CorrelationID).Logger()
	rep := UpgradeReport{CorrelationID: opt.CorrelationID, DryRun: opt.DryRun, Files: []upgrade.Result{}}
	trees, err := discover.WalkPaths(ctx, opt.Paths, discover.Options{})
	if err != nil {
		return rep, err
	}
	for _, t := range trees {
		rep.Trees = append(rep.Trees, t.Root)
		t.Sessions = append(t.Sessions, piSessions(&t, &rep)...)
		if err := upgradeTree(ctx, opt, t, &rep, log); err != nil {
			rep.Totals = upgrade.Count(rep.Files)
			return rep, err
		}
	}
	rep.Totals = upgrade.Count(rep.Files)
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("upgrade interrupted: %w", err)
	}
	return rep, nil
}

// piSessions returns the JSONL files discovery skipped as not a session
// that pi reads as one (a header after blank lines or a byte-order mark,
// which the reference refuses): those are exactly what an upgrade
// normalizes. Other skipped entries go to rep.Skipped: reported as
// notices, named on the command line or found in a tree alike.
func piSessions(t *discover.Tree, rep *UpgradeReport) []discover.Session {
	var out []discover.Session
	for _, sk := range t.Skipped {
		if sk.Kind == discover.SkipNotSession && filepath.Ext(sk.Path) == discover.ExtJSONL {
			if v, err := upgrade.Sniff(sk.Path); err == nil {
				rel, _ := filepath.Rel(t.Root, sk.Path)
				out = append(out, discover.Session{Path: sk.Path, Tree: t.Root, Rel: rel,
					Format: readers.FormatJSONLv3, Version: v, Lock: discover.LockPath(sk.Path)})
				continue
			}
		}
		// Named or found, an entry that is not a session is a notice,
		// as in every command.
		rep.Skipped = append(rep.Skipped, sk)
	}
	return out
}

func checkUpgradeOptions(opt *UpgradeOptions) error {
	if opt.CorrelationID == "" {
		opt.CorrelationID = ledger.NewCorrelationID()
	} else if !ledger.ValidCorrelationID(opt.CorrelationID) {
		return Usagef("--correlation-id %q: want 8 to 128 characters of A-Z a-z 0-9 . _ : -", opt.CorrelationID)
	}
	switch {
	case opt.LockTimeout < 0:
		return Usagef("--lock-timeout %s: want a positive duration", opt.LockTimeout)
	case opt.LockTimeout == 0:
		opt.LockTimeout = DefaultLockTimeout
	}
	if opt.Ops.OpenFile == nil {
		opt.Ops = durable.OS
	}
	if opt.Clock == nil {
		opt.Clock = func() time.Time { return time.Now().UTC() }
	}
	return nil
}

// upgradeTree upgrades the sessions of one tree (upgrade.Tree). The tree
// lock is taken (creating .pisess/) only when some session needs an
// upgrade and this is not a dry run.
func upgradeTree(ctx context.Context, opt UpgradeOptions, t discover.Tree, rep *UpgradeReport, log zerolog.Logger) error {
	sessions := make([]upgrade.Session, len(t.Sessions))
	for k, s := range t.Sessions {
		sessions[k] = upgrade.Session{Path: s.Path, Format: s.Format}
	}
	res, err := upgrade.Tree(ctx, sessions, upgrade.TreeOptions{
		Options: upgrade.Options{DryRun: opt.DryRun, LockTimeout: opt.LockTimeout, Ops: opt.Ops},
		Begin: func() (func(int, *upgrade.Options), func(upgrade.Totals), error) {
			return beginUpgradeRun(ctx, opt, t, log)
		},
		Log: log,
	})
	rep.Files = append(rep.Files, res...)
	return err
}

// beginUpgradeRun takes the tree lock, records the run as its holder and
// opens the journal, where it writes the run's start record: the run
// changes the tree from now on (each file before its note). It returns
// how each session's upgrade records its steps (journal notes of the run)
// and end, which writes the run's end record and lets the tree go.
func beginUpgradeRun(ctx context.Context, opt UpgradeOptions, t discover.Tree, log zerolog.Logger) (func(int, *upgrade.Options), func(upgrade.Totals), error) {
	l, _, err := ledger.LockTreeWait(ctx, opt.Ops, t.Root, opt.LockWait)
	if err != nil {
		return nil, nil, fmt.Errorf("upgrade %s: %w", t.Root, err)
	}
	if err := l.RecordHolder(opt.CorrelationID); err != nil {
		l.Unlock()
		return nil, nil, fmt.Errorf("upgrade %s: %w", t.Root, err)
	}
	journal, err := ledger.OpenJournalWith(opt.Ops, t.Root)
	if err != nil {
		l.Unlock()
		return nil, nil, fmt.Errorf("open journal of %s: %w", t.Root, err)
	}
	// The run's records (ledger.RunRecord), written with its first
	// change to the tree.
	journal.BeginRun(ledger.RunRecord{CorrelationID: opt.CorrelationID, At: wire.FormatTimestamp(opt.Clock()),
		Phase: ledger.RunStart, Command: "upgrade", PID: os.Getpid()}, nil)
	prepare := func(k int, uo *upgrade.Options) { recordUpgrade(opt, t.Sessions[k], journal, uo) }
	end := func(tot upgrade.Totals) {
		endUpgradeRun(journal, opt, tot, ctx.Err() != nil, log)
		journal.Close()
		l.Unlock()
	}
	return prepare, end, nil
}

// endUpgradeRun appends the run's end record for a tree (when it wrote
// anything there) and syncs the journal.
func endUpgradeRun(j *ledger.Journal, opt UpgradeOptions, t upgrade.Totals, interrupted bool, log zerolog.Logger) {
	end := ledger.RunRecord{CorrelationID: opt.CorrelationID, At: wire.FormatTimestamp(opt.Clock()), Phase: ledger.RunEnd,
		Command: "upgrade", Interrupted: interrupted, Totals: t.RunTotals()}
	err := j.EndRun(end, false)
	if err == nil {
		err = j.Sync()
	}
	if err != nil {
		log.Warn().Err(err).Str("tree", j.Tree()).Msg("end of the run not journaled")
	}
}

// recordUpgrade completes the options of session s's upgrade: its
// original goes to the run's quarantine, and each of its steps is a
// journal note of the run.
func recordUpgrade(opt UpgradeOptions, s discover.Session, journal *ledger.Journal, uo *upgrade.Options) {
	q := ledger.QuarantinePath(s.Tree, opt.CorrelationID, s.Rel, upgrade.QuarantineKind)
	uo.Tree, uo.QuarantinePath = s.Tree, q
	uo.Record = func(e upgrade.Event) error {
		kind := ledger.NoteUpgraded
		if e.Kind == upgrade.EventRestored {
			kind = ledger.NoteRestored
		} else if id := ledger.IdentityNote(e.QuarantinePath); id != "" {
			// A rollback restores this very file only.
			e.Detail += "; the original is " + id
		}
		return journal.Append(ledger.NoteRecord(ledger.Note{
			CorrelationID:  opt.CorrelationID,
			At:             wire.FormatTimestamp(opt.Clock()),
			Session:        s.Path,
			Kind:           kind,
			Path:           e.Path,
			QuarantinePath: e.QuarantinePath,
			SHA256:         e.SHA256,
			NewSHA256:      e.NewSHA256,
			Detail:         e.Detail,
		}))
	}
}
