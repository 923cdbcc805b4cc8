package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/rollback"
	"pisess/writers/upgrade"
)

func upgradeCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "upgrade",
		Usage:     "rewrite version 1 and 2 JSONL sessions as version 3, the way pi does (so that they can be migrated)",
		ArgsUsage: "PATH...",
		Description: `Rewrites each JSONL session of version 1 or 2 under PATH (a session file or a
directory tree) as version 3, exactly as the TypeScript pi upgrades a file when
it opens it, so that the reference (which migrates only version 3) and pisess
migrate can then migrate it. Never unasked: migrate refuses such a file and
names this command. Which files are legacy is pi's rule too: the header's
last "version" member, 1 when there is none. A file pi reads as version 3 or
newer ("version": 4 is reported as not a legacy file, exit 0) is never
rewritten, locked or journaled; nothing is touched that PATH does not name.

Version 1 entries get ids (the reference's deterministic legacy ids instead of
pi's random ones, so --dry-run shows exactly what a real run writes), each
entry's parentId is the entry before it, and a compaction's
firstKeptEntryIndex becomes firstKeptEntryId by pi's rule; message role
hookMessage becomes custom; the header gets "version":3. Each line is
rewritten as JSON.stringify(JSON.parse(line)) writes it, byte for byte as pi
does (entry ids aside), in JavaScript's JSON dialect and not in the serde_json
dialect of V2 frames: numbers stay the doubles they are (0.010665000000000001
is not 0.010665) in ECMAScript's notation (1.50e3 becomes 1500), a duplicate
member keeps its last value in its first place, integer-like keys come
first, a lone surrogate stays an escape. Blank lines, CRs before LF and a
leading byte-order mark are dropped, as pi drops them. A file pi would
silently damage (a line JSON.parse refuses, a torn last line, invalid UTF-8,
a number beyond a double) or whose result the reference could not read
anyway (a lone surrogate, too deep nesting) is refused with its line number
and reason and left alone. Whether the reference can migrate the upgraded
file is reported separately (file, line, reason).

Per file, under the session lock <file>.lock (a file pi holds locked is
waited for, up to --lock-timeout, after all the others): the new file is
written to <file>.upgrade.<uuid>.tmp with the original's mode and owner and
fsynced; the original is copied byte for byte to
<tree>/.pisess/quarantine/<correlation id>/<rel path>.pre-upgrade and
recorded in <tree>/.pisess/journal.jsonl; the file is checked unchanged and
renamed over, and the directory fsynced. pisess rollback <correlation id>
restores the originals. --dry-run reads and computes everything and writes
nothing anywhere.`,
		Flags: []cli.Flag{
			jsonFlag(),
			&cli.BoolFlag{Name: "dry-run", Usage: "show what would be written (ids, roles, new header); write nothing"},
			&cli.StringFlag{Name: "correlation-id", Usage: "the run's correlation id (8-128 of A-Z a-z 0-9 . _ : -); default: a new UUID, printed"},
			lockWaitFlag(),
			&cli.DurationFlag{Name: "lock-timeout", Value: rollback.DefaultLockTimeout, Usage: "how long to wait for a session lock before reporting the file busy"},
		},
		Action: func(c *cli.Context) error {
			if !c.Args().Present() {
				return engine.Usagef("upgrade wants at least one PATH (a session file or a tree); it never upgrades the default tree unasked")
			}
			clock, err := ClockFromEnv()
			if err != nil {
				return err
			}
			rep, err := runUpgrade(r.log.WithContext(c.Context), upgrade.RunOptions{
				Paths:         c.Args().Slice(),
				DryRun:        c.Bool("dry-run"),
				CorrelationID: c.String("correlation-id"),
				LockTimeout:   c.Duration("lock-timeout"),
				LockWait:      c.Duration("lock-wait"),
				Clock:         clock,
			})
			if rep.CorrelationID != "" {
				r.report, r.value = rep, rep
				r.text = func(w io.Writer) { renderUpgrade(w, rep, r.view) }
			}
			return err
		},
	}, exitStatusHelp(
		"0   every version 1 or 2 file was upgraded (or nothing to do)",
		"4   some files were refused, busy, changed by another writer during the upgrade, or failed",
		"8   pisess could not run (bad tree, no permission, interrupted)",
		"16  usage error (no PATH, bad flag, bad correlation id)",
		"32  the tree is locked by another pisess run (the holder is named)",
	))
}

// upgradeReport is upgrade.Run's report as a command's: its Tally is
// the exit status's count.
type upgradeReport struct{ upgrade.RunReport }

// Tally implements engine.Report. Refused, busy, changed and failed files are
// problems left (exit 4, as migrate counts its sessions); an upgrade is
// not a repair, so a run that upgraded everything exits 0. A file the
// reference still cannot migrate after its upgrade is not a problem of
// the upgrade: migrate will refuse it and say why.
func (r upgradeReport) Tally() engine.Tally {
	t := r.Totals
	return engine.Tally{Problems: t.Refused + t.Busy + t.Changed + t.Failed}
}

// runUpgrade is upgrade.Run with the defaults and errors of every
// command: a lock timeout of 0 waits rollback.DefaultLockTimeout, and an
// option Run refuses is a usage error (exit 16).
func runUpgrade(ctx context.Context, opt upgrade.RunOptions) (upgradeReport, error) {
	if opt.LockTimeout == 0 {
		opt.LockTimeout = rollback.DefaultLockTimeout
	}
	rep, err := upgrade.Run(ctx, opt)
	var oe *upgrade.OptionError
	if errors.As(err, &oe) {
		err = &engine.UsageError{Err: err}
	}
	return upgradeReport{rep}, err
}

func renderUpgrade(w io.Writer, rep upgradeReport, v view) {
	mode := "upgrade"
	if rep.DryRun {
		mode = "upgrade --dry-run (nothing written)"
	}
	fmt.Fprintf(w, "%s: correlation id %s\n", mode, rep.CorrelationID)
	for _, f := range rep.Files {
		problem := f.Status == upgrade.StatusRefused || f.Status == upgrade.StatusBusy ||
			f.Status == upgrade.StatusChanged || f.Status == upgrade.StatusFailed
		switch {
		case v.quiet && !problem:
			continue
		case !v.verbose && f.Status == upgrade.StatusCurrent:
			continue // counted in the summary
		}
		fmt.Fprintf(w, "%s %s", f.Status, relTo(rep.Trees, f.Path))
		if f.Version > 0 {
			fmt.Fprintf(w, " (version %d)", f.Version)
		}
		fmt.Fprintln(w)
		if p := f.Problem; p != nil {
			where := ""
			if p.Line > 0 {
				where = fmt.Sprintf("line %d: ", p.Line)
			}
			fmt.Fprintf(w, "  %s%s: %s\n", where, p.Class, relText(rep.Trees, p.Reason))
		}
		if f.Status == upgrade.StatusUpgraded || f.Status == upgrade.StatusPlanned {
			renderUpgradeDetail(w, rep.Trees, f)
		}
	}
	renderSkipped(w, rep.Trees, rep.Skipped, v)
	t := rep.Totals
	parts := []string{fmt.Sprintf("%d file(s)", t.Files)}
	for _, kv := range []struct {
		n    int
		name string
	}{{t.Upgraded, "upgraded"}, {t.Planned, "would be upgraded"}, {t.Current, "already version 3"}, {t.Skipped, "skipped"},
		{t.Refused, "refused"}, {t.Busy, "busy"}, {t.Changed, "changed during the upgrade"}, {t.Failed, "failed"},
		{t.NotMigratable, "still not migratable by the reference"}} {
		if kv.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", kv.n, kv.name))
		}
	}
	fmt.Fprintln(w, strings.Join(parts, ", "))
	if t.Upgraded > 0 {
		fmt.Fprintf(w, "undo this run with: %s\n", rollbackHint(rep.CorrelationID, rep.Trees))
	}
}

func renderUpgradeDetail(w io.Writer, trees []string, f upgrade.Result) {
	fmt.Fprintf(w, "  new header: %s\n", f.NewHeader)
	fmt.Fprintf(w, "  %d entries, %d ids assigned, %d parents set, %d roles renamed (hookMessage → custom)\n",
		f.Entries, len(f.IDs), f.ParentsSet, len(f.RolesRenamed))
	for _, id := range f.IDs {
		fmt.Fprintf(w, "    line %d: id %s", id.Line, id.ID)
		if id.Replaced != "" {
			fmt.Fprintf(w, " (replaces %s)", id.Replaced)
		}
		if id.Untyped {
			fmt.Fprintf(w, " (pisess's id: the reference's model refuses the entry: %s)", id.Reason)
		}
		fmt.Fprintln(w)
	}
	for _, l := range f.RolesRenamed {
		fmt.Fprintf(w, "    line %d: role hookMessage → custom\n", l)
	}
	for _, k := range f.FirstKept {
		switch {
		case !k.Removed:
			fmt.Fprintf(w, "    line %d: firstKeptEntryIndex %s is not a number: kept as it is\n", k.Line, k.Index)
		case len(k.ID) == 0:
			fmt.Fprintf(w, "    line %d: firstKeptEntryIndex %s names no entry with an id: removed, no firstKeptEntryId\n", k.Line, k.Index)
		default:
			fmt.Fprintf(w, "    line %d: firstKeptEntryIndex %s → firstKeptEntryId %s\n", k.Line, k.Index, k.ID)
		}
	}
	var dropped []string
	if f.BlankLines > 0 {
		dropped = append(dropped, fmt.Sprintf("%d blank line(s)", f.BlankLines))
	}
	if f.CRLFLines > 0 {
		dropped = append(dropped, fmt.Sprintf("the CR of %d CRLF line(s)", f.CRLFLines))
	}
	if f.BOM {
		dropped = append(dropped, "a byte-order mark")
	}
	if len(dropped) > 0 {
		fmt.Fprintf(w, "  dropped as pi drops them: %s\n", strings.Join(dropped, ", "))
	}
	fmt.Fprintf(w, "  %d bytes (sha256 %s) → %d bytes (sha256 %s)\n", f.SourceSize, f.SourceSHA256, f.NewSize, f.NewSHA256)
	if f.Quarantine != "" {
		fmt.Fprintf(w, "  original kept at %s\n", relTo(trees, f.Quarantine))
	}
	if ref := f.Reference; ref != nil {
		if ref.Migratable {
			fmt.Fprintf(w, "  the reference can migrate it\n")
		} else if p := ref.Problem; p != nil {
			fmt.Fprintf(w, "  the reference cannot migrate it: line %d (line %d of the original): %s: %s\n", p.Line, p.SourceLine, p.Class, p.Reason)
		}
	}
}
