package commands

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
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
			rep, err := engine.Runs(r.log.WithContext(c.Context), engine.RunsOptions{Paths: c.Args().Slice()})
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

func renderRuns(w io.Writer, rep engine.RunsReport) {
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
