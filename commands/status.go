package commands

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/readers/discover"
	"pisess/verify"
)

func statusCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "status",
		Usage:     "list sessions with their sidecar's status class (fast, read-only)",
		ArgsUsage: "[PATH...]",
		Description: `Prints, for the sessions under PATH (a session file or a directory tree; with
none, the default tree as for migrate), an overview per project directory
(--<cwd>--): sessions, counts by status class, bytes of the sources and of
their sidecars, the oldest stale session and the last run; then the problems
only (corrupt and partial sidecars, sessions that could not be classified);
then, per tree, the size of its journal and quarantine and its last run. -v
lists every session instead: path, source format and header version, entries,
size of the session file, status class, name (from the last session_info
entry) and the correlation id of the last run that migrated it.

The class is the reference's (unmigrated: no <stem>.v2; partial: no segments/,
or no index while the source has entries; corrupt: a failed check; stale:
passes the checks but pi wrote the session since; migrated: the rest), exactly
as the reference judges it (FORMAT.md §9): every check, every frame read, as
verify does — except for a sidecar the tree's fresh cache vouches for (every
file of it unchanged since a status at least as deep as pi's open, or the run
that wrote it, found it sound: .pisess/fresh.json, read and never written by
status), of which only the session file is judged again when it changed; so
the steady state stays fast (about a millisecond for a vouched store of a
million entries). A missing index while the source has entries is partial,
as the reference and FORMAT.md §9 say. A session's name (and, without a sidecar, its entry count)
is read from its first 16 MiB (256 MiB without a sidecar); beyond that the
name is not shown and the count comes from the manifest. Nothing is written
or locked.`,
		Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			rep, err := runStatus(r.log.WithContext(c.Context), statusOptions{Paths: c.Args().Slice()})
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

// statusOptions configure runStatus.
type statusOptions struct {
	// Paths are session files or trees; none means discover.DefaultRoots.
	Paths []string
}

// statusReport is every session's status, in tree order
// (verify.ListStatus).
type statusReport struct {
	verify.StatusListing
}

// Tally: status is informational; whatever it finds, it has run cleanly.
func (statusReport) Tally() engine.Tally { return engine.Tally{} }

// runStatus lists the status of every session under opt.Paths
// (verify.ListStatus). It never writes and never locks.
func runStatus(ctx context.Context, opt statusOptions) (statusReport, error) {
	roots, err := discover.RootsOrDefault(opt.Paths)
	if err != nil {
		return statusReport{}, err
	}
	l, err := verify.ListStatus(ctx, roots)
	return statusReport{l}, err
}

func renderStatus(w io.Writer, rep statusReport, v view) {
	if v.verbose {
		renderStatusSessions(w, rep, rep.Sessions)
		renderStatusTrees(w, rep)
		return
	}
	// An overview per project directory (--<cwd>--), then the problems.
	type project struct {
		name                 string
		classes              map[verify.Class]int
		sessions             int
		oldestStale          string
		oldestStaleAt        string
		sources              int64
		sidecars             uint64
		lastRun, lastRunTime string
	}
	var order []string
	projects := map[string]*project{}
	var problems []verify.StatusEntry
	for _, s := range rep.Sessions {
		name := relTo([]string{s.Tree}, s.Path)
		if i := strings.IndexByte(name, '/'); i >= 0 {
			name = name[:i]
		} else {
			name = "."
		}
		p := projects[name]
		if p == nil {
			p = &project{name: name, classes: map[verify.Class]int{}}
			projects[name] = p
			order = append(order, name)
		}
		p.sessions++
		p.classes[s.Class]++
		p.sources += s.Size
		p.sidecars += s.SidecarBytes
		if s.Class == verify.ClassStale && (p.oldestStaleAt == "" || s.Modified < p.oldestStaleAt) {
			p.oldestStale, p.oldestStaleAt = filepath.Base(s.Path), s.Modified
		}
		if s.LastMigration != "" && s.Modified >= p.lastRunTime {
			p.lastRun, p.lastRunTime = s.LastMigration, s.Modified
		}
		if s.Class == verify.ClassCorrupt || s.Class == verify.ClassPartial || s.Error != "" {
			problems = append(problems, s)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tSESSIONS\tMIGRATED\tSTALE\tUNMIGRATED\tCORRUPT\tPARTIAL\tSOURCES\tSIDECARS\tOLDEST STALE\tLAST RUN")
	for _, name := range order {
		p := projects[name]
		stale, last := "-", "-"
		if p.oldestStale != "" {
			stale = p.oldestStale + " (" + p.oldestStaleAt + ")"
		}
		if p.lastRun != "" {
			last = p.lastRun
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", p.name, p.sessions,
			p.classes[verify.ClassMigrated], p.classes[verify.ClassStale], p.classes[verify.ClassUnmigrated],
			p.classes[verify.ClassCorrupt], p.classes[verify.ClassPartial], size(p.sources), size(p.sidecars), stale, last)
	}
	tw.Flush()
	if len(problems) > 0 {
		fmt.Fprintln(w)
		renderStatusSessions(w, rep, problems)
	} else {
		renderStatusSummary(w, rep)
	}
	renderStatusTrees(w, rep)
}

// renderStatusSessions lists sessions, one line each, then their reasons
// and the summary.
func renderStatusSessions(w io.Writer, rep statusReport, rows []verify.StatusEntry) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tFORMAT\tENTRIES\tSIZE\tSTATUS\tNAME\tLAST RUN")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", relTo([]string{s.Tree}, s.Path), format, entries, size(s.Size), s.Class, name, last)
	}
	tw.Flush()
	for _, s := range rows {
		trees := []string{s.Tree}
		switch {
		case s.Error != "":
			fmt.Fprintf(w, "%s: %s: %s\n", relTo(trees, s.Path), s.Class, relText(trees, s.Error))
		case s.Reason != "":
			fmt.Fprintf(w, "%s: %s: %s\n", relTo(trees, s.Path), s.Class, relText(trees, s.Reason))
		}
	}
	renderStatusSummary(w, rep)
}

func renderStatusSummary(w io.Writer, rep statusReport) {
	var parts []string
	for _, c := range verify.ClassOrder(rep.Totals) {
		parts = append(parts, fmt.Sprintf("%d %s", rep.Totals[c], c))
	}
	fmt.Fprintf(w, "%d session(s)", len(rep.Sessions))
	if len(parts) > 0 {
		fmt.Fprintf(w, ": %s", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
}

// renderStatusTrees says, per tree, what pisess keeps there, after the
// entries that are not sessions.
func renderStatusTrees(w io.Writer, rep statusReport) {
	var roots []string
	for _, t := range rep.Trees {
		roots = append(roots, t.Root)
	}
	renderSkipped(w, roots, rep.Skipped, view{})
	for _, t := range rep.Trees {
		last := "no run yet"
		if r := t.LastRun; r != nil {
			last = fmt.Sprintf("last run %s (%s, ended %s)", r.CorrelationID, r.Command, r.End)
		}
		fmt.Fprintf(w, "tree %s: journal %s, quarantine %s, %d run(s), %s\n", t.Root, size(t.JournalBytes), size(t.QuarantineBytes), t.Runs, last)
	}
}
