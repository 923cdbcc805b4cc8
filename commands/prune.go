package commands

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/writers/durable"
)

func pruneCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "prune",
		Usage:     "delete quarantine entries and journal records of runs older than --keep-within",
		ArgsUsage: "[PATH...]",
		Description: `The one place pisess deletes anything, and only when asked. For the tree of
each PATH (with none, the default tree), under the tree lock: every run whose
last record (a rollback of it included) is older than --keep-within loses its
journal records and its quarantine directory; quarantine entries no journal
record names are deleted when they are older than the window too. A run with
any record inside the window, or one without a readable time, is kept whole,
and the journal keeps every other line byte for byte and in order, so every
rollback it still allows works; a pruned run can no longer be rolled back.

WINDOW is written as restic writes --keep-within: numbers each followed by a
unit, y (a year: 365 days), m (a month: 30 days), w (a week), d (a day: 24
hours) or h (an hour), such as 30d, 2w, 1y2m or 720h. Months and years have
these fixed lengths, so a window is as long whatever day it is measured from;
m is a month, never a minute, and units below an hour are refused.

What goes is first moved to .pisess/pruning/, then the journal is replaced
atomically, then that directory is deleted: a prune killed at any point leaves
at most .pisess/pruning/, which the next prune removes. Each removal is
logged. --dry-run lists what would go.

Example: a weekly crontab line that keeps 30 days of runs:
   30 4 * * 0 /usr/local/bin/pisess prune -q --keep-within 30d --log-format json`,
		Flags: []cli.Flag{
			jsonFlag(),
			&cli.StringFlag{Name: "keep-within", Usage: "keep runs whose last record is this recent: " + retentionHelp + "; required"},
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be removed; remove nothing"},
			lockWaitFlag(),
		},
		Action: func(c *cli.Context) error {
			clock, err := ClockFromEnv()
			if err != nil {
				return err
			}
			if !c.IsSet("keep-within") {
				return engine.Usagef("--keep-within is required: %s", retentionHelp)
			}
			keep, err := parseRetention(c.String("keep-within"))
			if err != nil {
				return engine.Usagef("--keep-within %v", err)
			}
			rep, err := runPrune(r.log.WithContext(c.Context), pruneOptions{
				Paths: c.Args().Slice(), KeepWithin: keep, DryRun: c.Bool("dry-run"),
				LockWait: c.Duration("lock-wait"), Clock: clock,
			})
			if rep.Cutoff != "" {
				r.report, r.value = rep, rep
				r.text = func(w io.Writer) { renderPrune(w, rep) }
			}
			return err
		},
	}, exitStatusHelp(
		"0   pruned (or nothing to prune)",
		"8   pisess could not run",
		"16  usage error (no or a bad --keep-within)",
		"32  the tree is locked by another pisess run",
	))
}

// pruneOptions configure runPrune.
type pruneOptions struct {
	// Paths are trees or paths inside them; none: the default tree.
	Paths []string
	// KeepWithin keeps every run whose last record (a rollback of it
	// included) is this recent, and its quarantine entries.
	KeepWithin time.Duration
	DryRun     bool
	LockWait   time.Duration
	Clock      func() time.Time
	Ops        durable.Ops
}

// pruneReport is the result of runPrune.
type pruneReport struct {
	DryRun bool               `json:"dryRun"`
	Cutoff string             `json:"cutoff"`
	Trees  []ledger.PruneTree `json:"trees"`
}

// Tally implements engine.Report.
func (pruneReport) Tally() engine.Tally { return engine.Tally{} }

// runPrune removes the quarantine entries and journal records of runs that
// ended before now − KeepWithin (issue 12, item 7): the one place pisess
// deletes, and only when asked. A run with a record inside the window (a
// rollback of it included) or a record without a readable time is kept
// whole, so every rollback the journal still allows works as before; the
// journal keeps its other lines byte for byte and in order, and is
// replaced atomically. Quarantine entries no journal record names are
// removed when their own time is outside the window. Each removal is
// logged.
func runPrune(ctx context.Context, opt pruneOptions) (pruneReport, error) {
	if opt.KeepWithin <= 0 {
		return pruneReport{}, engine.Usagef("--keep-within %s: want a positive duration such as 720h (30 days)", opt.KeepWithin)
	}
	now := time.Now()
	if opt.Clock != nil {
		now = opt.Clock()
	}
	cutoff := now.Add(-opt.KeepWithin)
	rep := pruneReport{DryRun: opt.DryRun, Cutoff: cutoff.UTC().Format(time.RFC3339), Trees: []ledger.PruneTree{}}
	roots, err := discover.TreeRoots(opt.Paths)
	if err != nil {
		return rep, err
	}
	rep.Trees, err = ledger.PruneTrees(ctx, *zerolog.Ctx(ctx), ledger.PruneOptions{DryRun: opt.DryRun, LockWait: opt.LockWait, Ops: opt.Ops}, roots, cutoff)
	return rep, err
}

func renderPrune(w io.Writer, rep pruneReport) {
	verb := "removed"
	if rep.DryRun {
		verb = "would remove"
	}
	for _, t := range rep.Trees {
		fmt.Fprintf(w, "tree %s: %s %d run(s) ended before %s (%d journal line(s)), %d quarantine entr(ies), %s; %d run(s) kept\n",
			t.Root, verb, len(t.Runs), rep.Cutoff, t.JournalLines, len(t.Quarantine), size(t.Bytes), t.KeptRuns)
		for _, id := range t.Runs {
			fmt.Fprintf(w, "  run %s\n", id)
		}
	}
}
