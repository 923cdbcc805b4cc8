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
	"pisess/rollback"
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

// piVersions are the header versions pi gives the JSONL sessions of t.
func piVersions(t discover.Tree) map[string]upgrade.PiVersion {
	out := map[string]upgrade.PiVersion{}
	for _, s := range t.Sessions {
		if s.Format == readers.FormatJSONLv3 {
			out[s.Path] = upgrade.SniffVersion(s.Path)
		}
	}
	return out
}

// upgradeTree upgrades the sessions of one tree. The tree lock is taken
// (creating .pisess/) only when some session needs an upgrade and this is
// not a dry run.
func upgradeTree(ctx context.Context, opt UpgradeOptions, t discover.Tree, rep *UpgradeReport, log zerolog.Logger) error {
	var journal *ledger.Journal
	base := len(rep.Files) // a session's result is rep.Files[base+k]
	versions := piVersions(t)
	if !opt.DryRun {
		need := false
		for _, s := range t.Sessions {
			need = need || s.Format == readers.FormatJSONLv3 && versions[s.Path].Legacy()
		}
		if need {
			l, _, err := ledger.LockTreeWait(ctx, opt.Ops, t.Root, opt.LockWait)
			if err != nil {
				return fmt.Errorf("upgrade %s: %w", t.Root, err)
			}
			defer l.Unlock()
			// Something to upgrade: the run changes the tree (each file
			// before its note), and is the lock's holder from now on.
			if err := l.RecordHolder(opt.CorrelationID); err != nil {
				return fmt.Errorf("upgrade %s: %w", t.Root, err)
			}
			if journal, err = ledger.OpenJournalWith(opt.Ops, t.Root); err != nil {
				return fmt.Errorf("open journal of %s: %w", t.Root, err)
			}
			defer journal.Close()
			// The run's records (ledger.RunRecord), written with its first
			// change to the tree.
			journal.BeginRun(ledger.RunRecord{CorrelationID: opt.CorrelationID, At: wire.FormatTimestamp(opt.Clock()),
				Phase: ledger.RunStart, Command: "upgrade", PID: os.Getpid()}, nil)
			defer func() { endUpgradeRun(journal, opt, upgrade.Count(rep.Files[base:]), ctx.Err() != nil, log) }()
		}
	}
	// Each session lock is tried once first; the sessions pi holds are
	// waited for (up to --lock-timeout each) after all the others, which
	// they would otherwise hold up in turn.
	first := opt
	first.LockTimeout = 0
	var held []int // indexes in t.Sessions of the sessions found locked
	for k, s := range t.Sessions {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("upgrade interrupted: %w", err)
		}
		res, err := upgradeSession(ctx, first, s, versions[s.Path], journal)
		rep.Files = append(rep.Files, *res)
		if err == nil && res.Status == upgrade.StatusBusy {
			held = append(held, k)
			continue
		}
		if err := logUpgrade(log, res, err); err != nil {
			return err
		}
	}
	for _, k := range held {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("upgrade interrupted: %w", err)
		}
		s := t.Sessions[k]
		res, err := upgradeSession(ctx, opt, s, versions[s.Path], journal)
		rep.Files[base+k] = *res
		if err := logUpgrade(log, res, err); err != nil {
			return err
		}
	}
	return nil
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

// logUpgrade logs a session's result; err, when set, interrupted it.
func logUpgrade(log zerolog.Logger, res *upgrade.Result, err error) error {
	ev := log.Info()
	if res.Status != upgrade.StatusUpgraded && res.Status != upgrade.StatusPlanned && res.Status != upgrade.StatusCurrent {
		ev = log.Warn()
	}
	ev.Str("session", res.Path).Str("status", string(res.Status)).Msg("upgrade")
	if err != nil {
		return fmt.Errorf("upgrade interrupted: %w", err)
	}
	return nil
}

// upgradeSession upgrades one session (upgrade.Upgrade), each of its
// steps a journal note of the run, unless its version settles it
// (upgrade.Settled).
func upgradeSession(ctx context.Context, opt UpgradeOptions, s discover.Session, pv upgrade.PiVersion, journal *ledger.Journal) (*upgrade.Result, error) {
	if res, ok := upgrade.Settled(s.Path, s.Format, pv); ok {
		return res, nil
	}
	uo := upgrade.Options{DryRun: opt.DryRun, LockTimeout: opt.LockTimeout, Ops: opt.Ops}
	if !opt.DryRun {
		q := ledger.QuarantinePath(s.Tree, opt.CorrelationID, s.Rel, upgrade.QuarantineKind)
		uo.Tree, uo.QuarantinePath = s.Tree, q
		uo.Record = func(e upgrade.Event) error {
			kind := ledger.NoteUpgraded
			if e.Kind == upgrade.EventRestored {
				kind = ledger.NoteRestored
			} else if id := rollback.IdentityNote(e.QuarantinePath); id != "" {
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
	return upgrade.Upgrade(ctx, s.Path, uo)
}
