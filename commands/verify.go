package commands

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/verify"
)

func verifyCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "verify",
		Usage:     "verify sidecars against their sources in full (read-only)",
		ArgsUsage: "PATH...",
		Description: `Verifies the sidecar of every session under PATH (a session file, its
<stem>.v2 sidecar, or a directory tree) against its source, in full: the
reference's three verification flags (entryCountMatch: the store's entry ids
in order are the source's; hashChainMatch: the hash chain recomputed from the
source equals the one over the frames; indexConsistent: index, frames and
manifest agree), every invariant INV-001..INV-007, and pi's acceptance rules
(directory and file types, private modes, the session owner, no symlink, no
unindexed segment, no pending rollback). Sessions without a sidecar met in a
tree are skipped; one named directly fails.

A sidecar whose store is whole but whose source pi has written since is
reported as stale ("pi will not use it until refreshed"), not as a failure:
pi marks a sidecar dirty on every save and reads the source until pisess
migrate refreshes it. Nothing is written or locked.`,
		Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return engine.Usagef("verify wants at least one PATH (see pisess verify --help)")
			}
			rep, err := runVerify(r.log.WithContext(c.Context), verifyOptions{Paths: c.Args().Slice()})
			if err != nil {
				return err
			}
			r.report, r.value = rep, rep
			r.text = func(w io.Writer) { renderVerify(w, rep, r.view) }
			return nil
		},
	}, exitStatusHelp(
		"0   every sidecar verified",
		"4   some sidecar failed verification (or a named session has none)",
		"8   verify could not run (a path that does not exist, an I/O error)",
		"16  usage error",
	))
}

// verifyOptions configure runVerify.
type verifyOptions struct {
	// Paths are session files, their <stem>.v2 sidecars, or trees (every
	// session with a sidecar in them). At least one is required.
	Paths []string
}

// verifyReport is what runVerify found (verify.Sidecars).
type verifyReport struct {
	verify.SidecarsReport
}

// Tally counts every session that did not verify as a problem left.
func (r verifyReport) Tally() engine.Tally { return engine.Tally{Problems: r.Failed} }

// runVerify checks each sidecar against its source in full (FORMAT.md §9,
// §11; verify.Sidecars): the three verification flags (entry ids in order,
// the hash chain recomputed from the source, index ↔ frames ↔ manifest),
// every invariant INV-001..INV-007, and pi's acceptance rules (types,
// private modes, the session owner, no symlink, no pending rollback). It
// never writes and never locks. An error means verify could not run (no
// path, a path that does not exist).
func runVerify(ctx context.Context, opt verifyOptions) (verifyReport, error) {
	if len(opt.Paths) == 0 {
		return verifyReport{}, engine.Usagef("verify wants at least one PATH: a session file, its <stem>.v2 sidecar, or a tree")
	}
	rep, err := verify.Sidecars(ctx, opt.Paths)
	return verifyReport{rep}, err
}

func renderVerify(w io.Writer, rep verifyReport, v view) {
	for _, s := range rep.Sessions {
		failed := !s.Skipped && !s.Verified && !s.Stale
		if v.quiet && !failed || !v.verbose && (s.Skipped || s.Verified) {
			continue // counted in the summary
		}
		switch {
		case s.Skipped:
			fmt.Fprintf(w, "skipped  %s: %s\n", relTo(rep.Trees, s.Path), relText(rep.Trees, s.Error))
			continue
		case s.Verified:
			fmt.Fprintf(w, "verified %s\n", relTo(rep.Trees, s.Sidecar))
		case s.Stale:
			fmt.Fprintf(w, "stale    %s: stale, pi will not use it until refreshed (pisess migrate refreshes it)\n", relTo(rep.Trees, s.Sidecar))
			continue
		default:
			fmt.Fprintf(w, "FAILED   %s\n", relTo(rep.Trees, s.Path))
		}
		if s.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", relText(rep.Trees, s.Error))
		}
		if s.Sidecar == "" || s.Error != "" && len(s.Invariants) == 0 {
			continue
		}
		f := s.Flags
		fmt.Fprintf(w, "  entryCountMatch=%t hashChainMatch=%t indexConsistent=%t (%d entries, source %d), fresh=%t\n",
			f.EntryCountMatch, f.HashChainMatch, f.IndexConsistent, s.Entries, s.SourceEntries, s.Fresh)
		for _, inv := range s.Invariants {
			if !inv.Holds {
				fmt.Fprintf(w, "  %s broken: %s\n", inv.Code, relText(rep.Trees, invariantCause(inv.Detail, s.Findings)))
			}
		}
		for _, fd := range s.Findings {
			fmt.Fprintf(w, "  [%s] %s%s: %s\n", fd.Code, relTo(rep.Trees, fd.Path), where(fd.Segment, fd.Offset, fd.Line), relText(rep.Trees, fd.Detail))
		}
	}
	renderSkipped(w, rep.Trees, rep.Skipped, v)
	skipped := len(rep.Sessions) - rep.Verified - rep.Stale - rep.Failed
	fmt.Fprintf(w, "%d verified, %d stale, %d failed, %d without a sidecar\n", rep.Verified, rep.Stale, rep.Failed, skipped)
}

// invariantCause is what a broken invariant's line says: the finding that
// breaks it, by its code only when that finding is listed below (one
// damage breaks several invariants, and was printed once per invariant).
func invariantCause(detail string, findings []verify.VerdictFinding) string {
	code, _, ok := strings.Cut(strings.TrimPrefix(detail, "["), "]")
	if !ok || !strings.HasPrefix(detail, "[") {
		return detail
	}
	for _, f := range findings {
		if f.Code == code {
			return "see [" + code + "] below"
		}
	}
	return detail
}
