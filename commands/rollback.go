package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/rollback"
	"pisess/writers/durable"
)

func rollbackCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "rollback",
		Usage:     "undo a migrate, upgrade or fsck --repair run by its correlation id, or roll a store back to a checkpoint",
		ArgsUsage: "CORRELATION_ID | --to-checkpoint N STORE",
		Description: `pisess rollback [--dry-run] [--json] [--tree PATH] CORRELATION_ID
   Reads the tree journal (<tree>/.pisess/journal.jsonl) for every session the
   run CORRELATION_ID (a migrate, upgrade or fsck --repair run) cut over or
   upgraded, and undoes each under its session lock (a session pi holds
   locked is waited for, up to --lock-timeout, after the run's others): the
   sidecar it installed (or continued in place) moves into
   <tree>/.pisess/quarantine/<id>/ (never deleted); a sidecar it displaced is
   put back, unless the run did not keep it (pisess built it and the session
   file still holds its bytes: pi then reads the session file until the next
   migrate); a sidecar a later run continued in place is left alone and
   reported (roll that run back first); an upgraded source is restored byte
   for byte — unless pi appended to it since, in which case the session is
   left as it is and reported (the current file is kept in the quarantine
   too; nothing is lost). Each step is a rollback event with the same
   correlation id in the journal, which outlives the stores it removes.
   Before it moves anything, the object must be where the journal says,
   beneath the tree, with the device, inode and digest recorded; a record
   that names anything else is listed as refused-record (exit 4) and none
   of it is acted on. Killed and run again, it finishes; run once more, it
   changes nothing.

pisess rollback [--dry-run] [--json] --to-checkpoint N STORE
   Rolls the V2 store STORE back to its checkpoint N as the reference does
   (the intent tmp/rollback.intent.json, the staged index, truncation, later
   segments and newer checkpoints set aside as .bak, manifest rewritten,
   rollback event), under the store's store.mutation.lock; a crash midway is
   finished (rolled forward) by the next pisess fsck --repair. A sidecar is
   also marked dirty, so pi reads its source instead of a shortened store.`,
		Flags: []cli.Flag{
			jsonFlag(),
			&cli.BoolFlag{Name: "dry-run", Usage: "say what would be done; change nothing"},
			&cli.StringSliceFlag{Name: "tree", Usage: "the session tree whose journal to read (repeatable; default: the default tree)", TakesFile: true},
			&cli.Uint64Flag{Name: "to-checkpoint", Usage: "roll STORE back to checkpoint `N`"},
			lockWaitFlag(),
			&cli.DurationFlag{Name: "lock-timeout", Value: rollback.DefaultLockTimeout, Usage: "how long to wait for a session or store lock"},
		},
		Action: func(c *cli.Context) error {
			clock, err := ClockFromEnv()
			if err != nil {
				return err
			}
			opt := rollbackOptions{DryRun: c.Bool("dry-run"), Trees: c.StringSlice("tree"),
				LockTimeout: c.Duration("lock-timeout"), LockWait: c.Duration("lock-wait"), Clock: clock}
			var a []string
			if n := c.Uint64("to-checkpoint"); n > 0 {
				if a, err = args(c, "STORE"); err != nil {
					return err
				}
				opt.Checkpoint, opt.Store = n, a[0]
			} else {
				if a, err = args(c, "CORRELATION_ID"); err != nil {
					return err
				}
				opt.CorrelationID = a[0]
			}
			rep, err := runRollback(r.log.WithContext(c.Context), opt)
			if err != nil {
				return err
			}
			r.report, r.value = rep, rep
			r.text = func(w io.Writer) { renderRollback(w, rep, r.view) }
			return nil
		},
	}, exitStatusHelp(
		"0   everything was rolled back (or was already)",
		"4   some sessions were left as they are (changed since, busy, failed), or the correlation id is unknown",
		"8   pisess could not run",
		"16  usage error (a malformed correlation id, a missing argument)",
		"32  the tree is locked by another pisess run",
	))
}

// rollbackOptions configure runRollback.
type rollbackOptions struct {
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

// rollbackReport is the result of runRollback. Its sessions and forged
// journal lines are rollback.InTrees'.
type rollbackReport struct {
	CorrelationID string                 `json:"correlationId,omitempty"`
	DryRun        bool                   `json:"dryRun"`
	Sessions      []rollback.TreeSession `json:"sessions,omitempty"`
	// Forged are journal lines of the run refused as forged or corrupt:
	// reported, never acted on.
	Forged []rollback.TreeForged `json:"forged,omitempty"`
	// Unknown is set when no tree's journal knows the correlation id.
	Unknown    string           `json:"unknown,omitempty"`
	Checkpoint *rollback.Result `json:"checkpoint,omitempty"`
}

// Tally implements engine.Report: sessions left not rolled back, or an
// unknown id.
func (r rollbackReport) Tally() engine.Tally {
	n := 0
	for _, s := range r.Sessions {
		if s.Error != "" {
			n++
		}
	}
	if r.Unknown != "" {
		n++
	}
	return engine.Tally{Problems: n + len(r.Forged)}
}

// runRollback undoes a migrate (or upgrade) run by its correlation id in
// every tree given, under each tree's lock, or rolls one store back to a
// checkpoint. A malformed correlation id is a usage error; one that no
// journal knows is reported as a problem (exit 4).
func runRollback(ctx context.Context, opt rollbackOptions) (rollbackReport, error) {
	if opt.LockTimeout == 0 {
		opt.LockTimeout = rollback.DefaultLockTimeout
	}
	ropt := rollback.Options{DryRun: opt.DryRun, LockTimeout: opt.LockTimeout, Ops: opt.Ops, Clock: opt.Clock}
	if opt.Checkpoint > 0 {
		if opt.Store == "" {
			return rollbackReport{}, engine.Usagef("--to-checkpoint needs the STORE directory")
		}
		res, err := rollback.ToCheckpoint(ctx, opt.Store, opt.Checkpoint, ropt)
		if err != nil {
			if errors.Is(err, rollback.ErrNoCheckpoint) {
				return rollbackReport{}, engine.Usagef("%v", err)
			}
			return rollbackReport{DryRun: opt.DryRun}, fmt.Errorf("rollback %s to checkpoint %d: %w", opt.Store, opt.Checkpoint, err)
		}
		return rollbackReport{DryRun: opt.DryRun, Checkpoint: &res}, nil
	}
	if !ledger.ValidCorrelationID(opt.CorrelationID) {
		return rollbackReport{}, engine.Usagef("correlation id %q is malformed: want 8 to 128 characters of A-Z a-z 0-9 . _ : -", opt.CorrelationID)
	}
	rep := rollbackReport{CorrelationID: opt.CorrelationID, DryRun: opt.DryRun}
	roots, err := discover.RootsOrDefault(opt.Trees)
	if err != nil {
		return rep, err
	}
	res, err := rollback.InTrees(ctx, roots, opt.CorrelationID, ropt, opt.LockWait)
	rep.Sessions, rep.Forged = res.Sessions, res.Forged
	if errors.Is(err, rollback.ErrBadCorrelationID) {
		return rep, engine.Usagef("%v", err)
	} else if err != nil {
		return rep, err
	}
	if !res.Known {
		rep.Unknown = fmt.Sprintf("no journal under %v knows correlation id %s", roots, opt.CorrelationID)
	}
	return rep, nil
}

func renderRollback(w io.Writer, rep rollbackReport, v view) {
	if c := rep.Checkpoint; c != nil {
		fmt.Fprintf(w, "rolled %s back to checkpoint %d: %d entries kept, %d cut\n", c.Store, c.Checkpoint.CheckpointSeq, c.Retained, c.Dropped)
		for _, s := range c.SetAside {
			fmt.Fprintf(w, "  set aside %s\n", s)
		}
		if c.MarkedDirty {
			fmt.Fprintf(w, "  source-state.json marked dirty: pi reads the source\n")
		}
		return
	}
	if rep.Unknown != "" {
		fmt.Fprintf(w, "rollback: %s\n", rep.Unknown)
		return
	}
	fmt.Fprintf(w, "rollback %s%s\n", rep.CorrelationID, map[bool]string{true: " (dry run)", false: ""}[rep.DryRun])
	for _, s := range rep.Sessions {
		if v.quiet && s.Error == "" {
			continue
		}
		trees := []string{s.Tree}
		fmt.Fprintf(w, "  %-20s %s\n", s.Action, relTo(trees, s.Session))
		if s.Detail != "" {
			fmt.Fprintf(w, "  %-20s %s\n", "", relText(trees, s.Detail))
		}
		if s.Error != "" {
			fmt.Fprintf(w, "  %-20s error: %s\n", "", relText(trees, s.Error))
		}
	}
	for _, f := range rep.Forged {
		trees := []string{f.Tree}
		fmt.Fprintf(w, "  %-20s %s line %d: %s (not acted on; fsck reports it)\n", "refused-record", relTo(trees, f.Journal), f.Line, relText(trees, f.Detail))
	}
}
