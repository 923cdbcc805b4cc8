package commands

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/commands/tune"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/rollback"
	"pisess/verify"
)

func fsckCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "fsck",
		Usage:     "check session trees and their V2 sidecars; --repair mends what can be mended",
		ArgsUsage: "[PATH...]",
		Description: `Checks every session under PATH (a session file or a directory tree; with
none, the default tree as for migrate) under the tree lock, as e2fsck checks a
file system. Each session gets the reference's status class (unmigrated,
migrated, stale, corrupt, partial) and the finer findings beneath it: pi's
acceptance rules (modes, owner, symlinks, unindexed segments, a pending
rollback), the store's integrity (torn tails, CRC, index missing or lagging,
manifest missing or wrong, chain), a full verification against the source,
and the source's own refusal (a notice: pi keeps using such a session as
JSONL), including those only writing meets (an entry whose frame is over the
64 MiB segment, a staging name over the file system's limit). A source that
cannot be read (permission, I/O, open-file limit, a lock) is a problem, never
a notice. Every named entry of a store must have its type (manifest, index
and segments regular files; segments/, index/, checkpoints/, migrations/ and
tmp/ directories: else corrupt; a mutation lock or ledger of the wrong type,
or an empty ledger: a problem under the class migrated). The tree's own
findings: leftover staging and backup directories, directories whose session
is gone, a stale tree lock, a .pisess, lock or journal of the wrong type,
journal lines that do not parse or that name anything outside the tree
(forged records). Every finding names the file, the check that failed and
the repair that applies.
*.seg.bak files are ignored. Without --repair nothing is written.

--repair mends, then checks again: torn tails are cut after the last whole
frame (the cut bytes kept in the quarantine first), index and manifest
recomputed from the frames, modes set to 0700/0600, owner given back to the
session file's owner (as root), a pending rollback finished (rolled
forward), staging and orphaned directories quarantined, a backup restored when no sidecar is installed
(after it is verified) or else quarantined, stale and corrupt sidecars rebuilt
from the source through the migrate pipeline (the old one quarantined; a
file, FIFO or symlink at <stem>.v2 is displaced the same way; an in-place
repair that fails, or leaves its damage, is escalated to that rebuild), a
stale tree lock taken over, a .pisess, lock or journal of the wrong type
moved into the quarantine (the link itself, never its target; the new
journal's first note says where; when the move fails, the finding names the
mv to run by hand), unparsable or forged journal lines copied to the
quarantine and acknowledged (the journal is never rewritten). Every move is
listed as a repaired finding (fsck.moved for the sidecar a rebuild
displaced). Nothing is
deleted: what is removed goes to <tree>/.pisess/quarantine/<correlation id>/,
and every repair is a journal note with that id, so pisess rollback can undo
the rebuilds. A repair of an installed store holds the session lock and the
store's store.mutation.lock, from the check to the end of the rebuild; a
session pi holds locked is waited for (up to
30 s) without keeping its place among the --jobs, so the sessions after it
are checked meanwhile. A symlinked ancestor cannot be repaired: it is
reported with what to do. A second fsck after --repair finds nothing.

A stale sidecar (pi wrote the session since) is a notice, not a problem
(exit 0): pi reads the session file until a refresh, which pisess migrate or
fsck --repair makes.`,
		Flags: []cli.Flag{
			jsonFlag(),
			&cli.BoolFlag{Name: "repair", Usage: "repair what can be repaired without losing data, then check again"},
			&cli.IntFlag{Name: "jobs", Value: 0, Usage: "sessions checked in parallel (0: number of CPUs)"},
			lockWaitFlag(),
		},
		Action: func(c *cli.Context) error {
			clock, err := ClockFromEnv()
			if err != nil {
				return err
			}
			var bar Progress = noProgress{}
			rep, err := runFsck(r.log.WithContext(c.Context), c.Args().Slice(), &rollback.Fsck{
				Repair: c.Bool("repair"),
				Jobs:   c.Int("jobs"),
				Clock:  clock,
				// LockWait: --lock-wait (issue 12).
				LockWait: c.Duration("lock-wait"),
				Progress: func(done, total int) {
					if done == 1 {
						bar = NewProgress(r.stderr, total, "checking")
					}
					bar.Add(1)
				},
			})
			bar.Finish()
			if err != nil {
				return err
			}
			r.report, r.value = rep, rep
			r.text = func(w io.Writer) { renderFsck(w, rep, r.view) }
			return nil
		},
	}, exitStatusHelp(
		"0   clean: nothing wrong (unmigrated sessions are not a problem)",
		"1   problems were found and all of them were repaired",
		"4   problems were found and some are left (without --repair: any problem)",
		"8   fsck could not run (bad tree, no permission, interrupted)",
		"16  usage error",
		"32  the tree is locked by another pisess run (the holder is named)",
		"One value, never a bitwise OR of several: the most urgent wins.",
	))
}

// runFsck runs r, fsck's check (and with r.Repair its repairs: rollback.Fsck
// says what it finds and mends), over every session under roots (none: the
// default tree) the way e2fsck checks a file system, tree by tree under
// each tree's lock; the rebuilds go through the migrate pipeline
// (engine.FsckRebuild).
//
// The report's Tally gives the exit status (exit.go; the values are fsck
// --help's): 0 clean, 1 problems found and all repaired, 4 problems left,
// never combined as bits. An error means fsck could not run:
// engine.ErrTreeLocked in its chain (exit 32) when another pisess run
// holds a tree's lock, anything else exit 8. Notices do not count: a
// source the reference refuses (pi keeps using it as JSONL), a stale
// sidecar (pi reads the session file until a refresh;
// verify.FsckFinding's Notice).
func runFsck(ctx context.Context, roots []string, r *rollback.Fsck) (fsckReport, error) {
	roots, err := discover.RootsOrDefault(roots)
	if err != nil {
		return fsckReport{}, err
	}
	trees, err := discover.Walk(roots)
	if err != nil {
		return fsckReport{}, fmt.Errorf("fsck: %w", err)
	}
	r.Log = zerolog.Ctx(ctx)
	if r.Jobs <= 0 {
		r.Jobs = tune.CPUs()
	}
	r.Rebuild = engine.FsckRebuild(r)
	rep := fsckReport{Repair: r.Repair}
	if r.Repair {
		rep.CorrelationID = r.CorrelationID
		if rep.CorrelationID == "" {
			rep.CorrelationID = ledger.NewCorrelationID()
		} else if !ledger.ValidCorrelationID(rep.CorrelationID) {
			return fsckReport{}, engine.Usagef("correlation id %q does not match ^[A-Za-z0-9._:-]{8,128}$", rep.CorrelationID)
		}
		r.CorrelationID = rep.CorrelationID
	}
	rep.Trees, err = r.Run(ctx, trees)
	rep.Totals = verify.SumFsck(rep.Trees)
	return rep, err
}

// fsckReport is what runFsck found and, with Repair, did.
type fsckReport struct {
	// CorrelationID is the run's id, which every journal note of its
	// repairs carries and the quarantine directory is named after; "" for
	// a check without --repair (which writes nothing).
	CorrelationID string            `json:"correlationId,omitempty"`
	Repair        bool              `json:"repair"`
	Trees         []verify.FsckTree `json:"trees"`
	Totals        verify.FsckTotals `json:"totals"`
}

// Tally counts the problems (notices excluded) and those repaired.
func (r fsckReport) Tally() engine.Tally {
	return engine.Tally{Problems: r.Totals.Problems, Repaired: r.Totals.Repaired}
}

func renderFsck(w io.Writer, rep fsckReport, v view) {
	mode := "fsck (read-only)"
	if rep.Repair {
		mode = "fsck --repair: correlation id " + rep.CorrelationID
	}
	fmt.Fprintln(w, mode)
	// -q: only the problems left; default: every finding; -v: every
	// session too.
	shown := func(f verify.FsckFinding) bool { return !v.quiet || !f.Notice && !f.Repaired }
	for _, t := range rep.Trees {
		fmt.Fprintf(w, "tree %s: %d session(s)\n", t.Root, len(t.Sessions))
		for _, f := range t.Findings {
			if shown(f) {
				renderFinding(w, "  ", t.Root, f)
			}
		}
		for _, s := range t.Sessions {
			var fs []verify.FsckFinding
			for _, f := range s.Findings {
				if shown(f) {
					fs = append(fs, f)
				}
			}
			if len(fs) == 0 && !v.verbose {
				continue
			}
			class := string(s.Class)
			if s.After != "" && s.After != s.Class {
				class += " -> " + string(s.After)
			}
			fmt.Fprintf(w, "  %s [%s]\n", relTo([]string{t.Root}, s.Path), class)
			for _, f := range fs {
				renderFinding(w, "    ", t.Root, f)
			}
		}
	}
	for _, tr := range rep.Trees {
		renderSkipped(w, []string{tr.Root}, tr.Skipped, v)
	}
	t := rep.Totals
	var classes []string
	for _, c := range verify.ClassOrder(t.Classes) {
		classes = append(classes, fmt.Sprintf("%d %s", t.Classes[c], c))
	}
	fmt.Fprintf(w, "%d session(s)", t.Sessions)
	if len(classes) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(classes, ", "))
	}
	fmt.Fprintf(w, "; %d problem(s), %d repaired, %d left; %d notice(s)\n", t.Problems, t.Repaired, t.Left, t.Notices)
	if !rep.Repair && t.Left > 0 {
		roots := make([]string, 0, len(rep.Trees))
		for _, t := range rep.Trees {
			roots = append(roots, t.Root)
		}
		fmt.Fprintf(w, "run %s to repair what can be repaired\n", repairHint(roots))
	}
}

// renderFinding prints a finding with its path relative to the tree root
// (as every path of a text report): "[code] path (where): detail", then
// what repairs it.
func renderFinding(w io.Writer, indent, root string, f verify.FsckFinding) {
	state := "problem"
	switch {
	case f.Notice:
		state = "notice"
	case f.Repaired:
		state = "repaired"
	}
	trees := []string{root}
	path := relTo(trees, f.Path)
	if path == "." {
		path = "(the tree)"
	}
	fmt.Fprintf(w, "%s%s [%s] %s%s", indent, state, f.Code, path, where(f.Segment, f.Offset, f.Line))
	if f.Detail != "" {
		fmt.Fprintf(w, ": %s", relText(trees, f.Detail))
	}
	fmt.Fprintln(w)
	if f.Notice || f.Repaired {
		return
	}
	fmt.Fprintf(w, "%s  repair: %s\n", indent, relText(trees, f.Repair))
	if f.RepairError != "" {
		fmt.Fprintf(w, "%s  not repaired: %s\n", indent, relText(trees, f.RepairError))
	}
}

// where is " (segment N, offset O)" or " (line N)" for a finding in a
// file, "" when it is about the file as a whole.
func where(segment uint64, offset, line int64) string {
	switch {
	case segment > 0:
		return fmt.Sprintf(" (segment %d, offset %d)", segment, offset)
	case line > 0:
		return fmt.Sprintf(" (line %d)", line)
	}
	return ""
}
