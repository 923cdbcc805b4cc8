package commands

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/ledger"
	"pisess/readers/discover"
)

func runsCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "runs",
		Usage:     "list the runs a tree's journal records (read-only)",
		ArgsUsage: "[PATH...]",
		Description: `Lists the runs recorded in the journal of the tree of each PATH (a tree or
any path inside it; with none, the default tree): correlation id, command
(migrate, upgrade or fsck --repair; "interrupted" when the run began and never
ended, as a killed run, until a later run healed what it left), start and end,
sessions, sidecars installed and failures (the run's own summary), upgrades,
repairs, displaced sidecars not kept (reproducible), whether and when the run
was rolled back (the rollback is not part of the run), and the bytes its
quarantine holds. Nothing is written or locked.`,
		Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			rep, err := runRuns(r.log.WithContext(c.Context), runsOptions{Paths: c.Args().Slice()})
			if err != nil {
				return err
			}
			r.report, r.value = rep, rep
			r.text = func(w io.Writer) { renderRuns(w, rep) }
			return nil
		},
	}, exitStatusHelp(
		"0   the runs were listed",
		"8   a journal could not be read",
		"16  usage error",
	))
}

// runsReport is the result of runRuns.
type runsReport struct {
	Trees []ledger.TreeRuns `json:"trees"`
}

// Tally implements engine.Report: listing runs finds no problem.
func (runsReport) Tally() engine.Tally { return engine.Tally{} }

// runsOptions configure runRuns.
type runsOptions struct {
	// Paths are trees or paths inside them; none: the default tree.
	Paths []string
}

// runRuns lists the runs each tree's journal records (ledger.Runs). It
// only reads: no lock, nothing written.
func runRuns(ctx context.Context, opt runsOptions) (runsReport, error) {
	roots, err := discover.TreeRoots(opt.Paths)
	if err != nil {
		return runsReport{}, err
	}
	trees, err := ledger.Runs(ctx, roots)
	return runsReport{Trees: trees}, err
}

func renderRuns(w io.Writer, rep runsReport) {
	for _, t := range rep.Trees {
		fmt.Fprintf(w, "tree %s: %d run(s)\n", t.Root, len(t.Runs))
		if len(t.Runs) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RUN\tCOMMAND\tSTART\tEND\tSESSIONS\tINSTALLED\tFAILED\tROLLED BACK\tQUARANTINE")
		for _, run := range t.Runs {
			rb := "no"
			if run.RolledBack {
				rb = "yes " + run.RollbackAt
			}
			cmd := run.Command
			if cmd == "" {
				cmd = "-"
			}
			switch {
			case run.Interrupted && run.HealedBy != "":
				cmd += " (interrupted, healed by " + run.HealedBy + ")"
			case run.Interrupted:
				cmd += " (interrupted)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", run.CorrelationID, cmd, run.Start, run.End,
				run.Sessions, run.Completed, run.Failed, rb, size(run.QuarantineBytes))
		}
		tw.Flush()
		if t.BadLines > 0 {
			fmt.Fprintf(w, "%d journal line(s) do not parse: pisess fsck reports them\n", t.BadLines)
		}
	}
}
