package upgrade

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
	"pisess/writers/wire"
)

// RunOptions configure Run.
type RunOptions struct {
	// Paths are session files or trees; none means discover.DefaultRoots.
	Paths  []string
	DryRun bool
	// CorrelationID is the run's id (journal notes, quarantine); "" makes
	// a new one.
	CorrelationID string
	// LockTimeout bounds the wait for each session lock (0: each is tried
	// once). The default is the caller's: commands gives the one every
	// command waits (engine.DefaultLockTimeout, rollback's).
	LockTimeout time.Duration
	// LockWait is how long to wait for a tree lock another run holds
	// (--lock-wait); 0: exit 32 at once.
	LockWait time.Duration
	// Clock stamps journal notes; nil means the wall clock.
	Clock func() time.Time
	// Ops performs the file operations; the zero value is durable.OS.
	Ops durable.Ops
}

// RunReport is the result of Run: one Result per session found, in
// discovery order.
type RunReport struct {
	CorrelationID string   `json:"correlationId"`
	DryRun        bool     `json:"dryRun"`
	Trees         []string `json:"trees"`
	Files         []Result `json:"files"`
	Totals        Totals   `json:"totals"`
	// Skipped are entries discovery did not take as sessions.
	Skipped []discover.Skipped `json:"skippedEntries,omitempty"`
}

// OptionError is a RunOptions value Run refuses to run with (a malformed
// correlation id, a negative lock timeout): the caller asked wrongly, and
// commands maps it to exit 16 (usage).
type OptionError struct{ msg string }

func (e *OptionError) Error() string { return e.msg }

func optionErrorf(format string, a ...any) error {
	return &OptionError{msg: fmt.Sprintf(format, a...)}
}

// Run rewrites every version 1 or 2 JSONL session under opt.Paths as
// version 3 (Upgrade), under each tree's lock and each session's lock,
// quarantining each original and recording an upgraded note in the tree
// journal, so that `pisess rollback <correlation id>` restores it.
// Sessions that are version 3 are reported as such without being opened;
// SQLite sessions are skipped. A dry run takes no tree lock and writes
// nothing anywhere. Errors mean the run could not run (bad option, an
// *OptionError; tree lock held, unreadable tree, interrupted); per-file
// problems are in the report.
func Run(ctx context.Context, opt RunOptions) (RunReport, error) {
	if err := checkRunOptions(&opt); err != nil {
		return RunReport{}, err
	}
	log := zerolog.Ctx(ctx).With().Str("correlationId", opt.CorrelationID).Logger()
	rep := RunReport{CorrelationID: opt.CorrelationID, DryRun: opt.DryRun, Files: []Result{}}
	trees, err := discover.WalkPaths(ctx, opt.Paths, discover.Options{})
	if err != nil {
		return rep, err
	}
	for _, t := range trees {
		rep.Trees = append(rep.Trees, t.Root)
		t.Sessions = append(t.Sessions, piSessions(&t, &rep)...)
		if err := runTree(ctx, opt, t, &rep, log); err != nil {
			rep.Totals = Count(rep.Files)
			return rep, err
		}
	}
	rep.Totals = Count(rep.Files)
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
func piSessions(t *discover.Tree, rep *RunReport) []discover.Session {
	var out []discover.Session
	for _, sk := range t.Skipped {
		if sk.Kind == discover.SkipNotSession && filepath.Ext(sk.Path) == discover.ExtJSONL {
			if v, err := Sniff(sk.Path); err == nil {
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

func checkRunOptions(opt *RunOptions) error {
	if opt.CorrelationID == "" {
		opt.CorrelationID = ledger.NewCorrelationID()
	} else if !ledger.ValidCorrelationID(opt.CorrelationID) {
		return optionErrorf("--correlation-id %q: want 8 to 128 characters of A-Z a-z 0-9 . _ : -", opt.CorrelationID)
	}
	if opt.LockTimeout < 0 {
		return optionErrorf("--lock-timeout %s: want a positive duration", opt.LockTimeout)
	}
	if opt.Ops.OpenFile == nil {
		opt.Ops = durable.OS
	}
	if opt.Clock == nil {
		opt.Clock = func() time.Time { return time.Now().UTC() }
	}
	return nil
}

// runTree upgrades the sessions of one tree (Tree). The tree lock is
// taken (creating .pisess/) only when some session needs an upgrade and
// this is not a dry run.
func runTree(ctx context.Context, opt RunOptions, t discover.Tree, rep *RunReport, log zerolog.Logger) error {
	sessions := make([]Session, len(t.Sessions))
	for k, s := range t.Sessions {
		sessions[k] = Session{Path: s.Path, Format: s.Format}
	}
	res, err := Tree(ctx, sessions, TreeOptions{
		Options: Options{DryRun: opt.DryRun, LockTimeout: opt.LockTimeout, Ops: opt.Ops},
		Begin: func() (func(int, *Options), func(Totals), error) {
			return beginRun(ctx, opt, t, log)
		},
		Log: log,
	})
	rep.Files = append(rep.Files, res...)
	return err
}

// beginRun takes the tree lock, records the run as its holder and opens
// the journal, where it writes the run's start record: the run changes
// the tree from now on (each file before its note). It returns how each
// session's upgrade records its steps (journal notes of the run) and end,
// which writes the run's end record and lets the tree go.
func beginRun(ctx context.Context, opt RunOptions, t discover.Tree, log zerolog.Logger) (func(int, *Options), func(Totals), error) {
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
	prepare := func(k int, uo *Options) { recordSession(opt, t.Sessions[k], journal, uo) }
	end := func(tot Totals) {
		endRun(journal, opt, tot, ctx.Err() != nil, log)
		journal.Close()
		l.Unlock()
	}
	return prepare, end, nil
}

// endRun appends the run's end record for a tree (when it wrote anything
// there) and syncs the journal.
func endRun(j *ledger.Journal, opt RunOptions, t Totals, interrupted bool, log zerolog.Logger) {
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

// recordSession completes the options of session s's upgrade: its
// original goes to the run's quarantine, and each of its steps is a
// journal note of the run.
func recordSession(opt RunOptions, s discover.Session, journal *ledger.Journal, uo *Options) {
	q := ledger.QuarantinePath(s.Tree, opt.CorrelationID, s.Rel, QuarantineKind)
	uo.Tree, uo.QuarantinePath = s.Tree, q
	uo.Record = func(e Event) error {
		kind := ledger.NoteUpgraded
		if e.Kind == EventRestored {
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
