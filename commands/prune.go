package commands

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
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
			rep, err := engine.Prune(r.log.WithContext(c.Context), engine.PruneOptions{
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

func renderPrune(w io.Writer, rep engine.PruneReport) {
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
