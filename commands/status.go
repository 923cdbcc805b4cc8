package commands

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/verify"
)

func statusCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "status",
		Usage:     "list sessions with their sidecar's status class (fast, read-only)",
		ArgsUsage: "[PATH...]",
		Description: `Prints one line per session under PATH (a session file or a directory tree;
with none, the default tree as for migrate): path, source format and header
version, entries, size of the session file, status class, name (from the last
session_info entry) and the correlation id of the last run that migrated it.

The class is the reference's (unmigrated: no <stem>.v2; partial: no segments/,
or no index while the source has entries; corrupt: a failed check; stale:
passes the checks but pi wrote the session since; migrated: the rest), judged
from manifests, index sizes, source-state.json and fingerprints only, never
frame bodies (the source is hashed only when the fast identity check cannot
decide, as pi does), so it stays fast on huge stores. Damage inside frames is
pisess fsck's to find. Nothing is written or locked.`,
		Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			rep, err := engine.Status(r.log.WithContext(c.Context), engine.StatusOptions{Paths: c.Args().Slice()})
			if err != nil {
				return err
			}
			r.report, r.value = rep, rep
			r.text = func(w io.Writer) { renderStatus(w, rep, r.view) }
			return nil
		},
	}, exitStatusHelp(
		"0   the status was listed (whatever the classes: status is informational)",
		"8   the trees could not be read",
		"16  usage error",
	))
}

func renderStatus(w io.Writer, rep engine.StatusReport, v view) {
	// Without -v only sessions that are not migrated and fresh are
	// listed (problems first: corrupt and partial, then the others).
	var rows []engine.StatusEntry
	for _, pass := range []func(engine.StatusEntry) bool{
		func(s engine.StatusEntry) bool {
			return s.Class == verify.ClassCorrupt || s.Class == verify.ClassPartial
		},
		func(s engine.StatusEntry) bool {
			return s.Class != verify.ClassCorrupt && s.Class != verify.ClassPartial && (v.verbose || s.Class != verify.ClassMigrated)
		},
	} {
		for _, s := range rep.Sessions {
			if pass(s) {
				rows = append(rows, s)
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(rows) > 0 {
		fmt.Fprintln(tw, "SESSION\tFORMAT\tENTRIES\tSIZE\tSTATUS\tNAME\tLAST RUN")
	}
	for _, s := range rows {
		format := s.SourceFormat
		if s.Version != 0 {
			format += fmt.Sprintf(" v%d", s.Version)
		}
		entries := "-"
		if s.HasEntries {
			entries = fmt.Sprint(s.Entries)
		}
		name := "-"
		if s.Name != nil {
			name = fmt.Sprintf("%q", *s.Name)
		}
		last := s.LastMigration
		if last == "" {
			last = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Path, format, entries, size(s.Size), s.Class, name, last)
	}
	tw.Flush()
	for _, s := range rows {
		switch {
		case s.Error != "":
			fmt.Fprintf(w, "%s: %s: %s\n", s.Path, s.Class, s.Error)
		case s.Reason != "":
			fmt.Fprintf(w, "%s: %s: %s\n", s.Path, s.Class, s.Reason)
		}
	}
	var parts []string
	for _, c := range engine.ClassOrder(rep.Totals) {
		parts = append(parts, fmt.Sprintf("%d %s", rep.Totals[c], c))
	}
	fmt.Fprintf(w, "%d session(s)", len(rep.Sessions))
	if len(parts) > 0 {
		fmt.Fprintf(w, ": %s", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
}
