package commands

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
)

func buildCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "build",
		Usage:     "write a V2 store of one session into a new directory (plumbing)",
		ArgsUsage: "SESSION OUTDIR",
		Description: `Reads the session SESSION (JSONL or SQLite) as the reference's migration reads
it and writes a V2 store of it into OUTDIR, which must not exist (with --force,
an OUTDIR that is an empty directory or a V2 store is replaced). The store is
built in a sibling staging directory and renamed into place once sealed.

This is plumbing for demos and tests, not the migration: it writes no ledger
event and no source-state.json, takes no lock and installs no sidecar (see
pisess migrate). With PISESS_CLOCK set, the store is byte-identical to the
reference implementation's:
   PISESS_CLOCK=2026-01-01T00:00:00.000Z pisess build session.jsonl /tmp/session.v2
   pisess inspect /tmp/session.v2`,
		Flags: []cli.Flag{
			jsonFlag(),
			&cli.Int64Flag{Name: "max-segment-bytes", Value: 64 << 20, Usage: "segment rollover size in bytes, at most 64 MiB (the most pi reads)"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing OUTDIR that is an empty directory or a V2 store"},
		},
		Action: func(c *cli.Context) error {
			a, err := args(c, "SESSION", "OUTDIR")
			if err != nil {
				return err
			}
			clock, err := ClockFromEnv()
			if err != nil {
				return err
			}
			max := c.Int64("max-segment-bytes")
			if max <= 0 {
				return engine.Usagef("--max-segment-bytes %d: want a positive size", max)
			}
			bar := NewBytesProgress(r.stderr, -1, "building")
			rep, err := engine.Build(r.log.WithContext(c.Context), engine.BuildOptions{
				Session:         a[0],
				OutDir:          a[1],
				MaxSegmentBytes: max,
				Force:           c.Bool("force"),
				Clock:           clock,
				Progress:        func(n int64) { bar.Add(int(n)) },
			})
			bar.Finish()
			if err != nil {
				return err
			}
			r.report, r.value = rep, rep
			r.text = func(w io.Writer) { renderBuild(w, rep) }
			return nil
		},
	}, exitStatusHelp(
		"0   the store was built",
		"8   the session cannot be read or the reference's model refuses it, or writing failed",
		"16  usage error (OUTDIR exists, bad flag, invalid PISESS_CLOCK)",
	))
}

func renderBuild(w io.Writer, rep engine.BuildReport) {
	verb := "built"
	if rep.Replaced {
		verb = "rebuilt"
	}
	fmt.Fprintf(w, "%s %s from %s\n", verb, rep.Store, rep.Session)
	fmt.Fprintf(w, "  session %s (%s)\n", rep.SessionID, rep.SourceFormat)
	fmt.Fprintf(w, "  %d entries, %d bytes in %d segment(s)\n", rep.Entries, rep.Bytes, rep.Segments)
	fmt.Fprintf(w, "  chain %s\n", rep.ChainHash)
}
