package commands

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
)

func migrateCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "migrate",
		Usage:     "migrate session trees to V2 sidecars (plan, stage, verify, cut over)",
		ArgsUsage: "[PATH...]",
		Description: `Migrates every session under PATH (a session file or a directory tree; with
none, $PI_SESSIONS_DIR, else $PI_CODING_AGENT_DIR/sessions, else
~/.pi/agent/sessions) to a Session Store V2 sidecar <stem>.v2 beside it.

Each session gets one action: migrate (no sidecar), refresh (the sidecar is
stale: pi wrote the session since — the everyday job of a cron run), skip
(fresh; --force rebuilds it), needs_repair (corrupt or partial sidecar, or
leftovers of an interrupted run: left for pisess fsck --repair; --force
rebuilds from the source instead) or refuse (the reference cannot migrate it:
file, line and reason are printed as a notice; pi keeps reading it as JSONL,
so it does not change the exit status unless --strict).

Per session, under the session lock <file>.lock: the store is built in
<stem>.v2.staging.<uuid>, sealed, verified against the source (entry ids,
hash chain, index, manifest, invariants, acceptance rules, source fingerprint
unchanged), given a clean source-state.json, and renamed into <stem>.v2. A
displaced sidecar goes to <tree>/.pisess/quarantine/<correlation id>/, and is
not kept when pisess built it and the source still holds the bytes it was
built from (--keep-displaced keeps it). A stale sidecar whose session only
gained whole lines since pisess built it is continued in place instead: it is
marked dirty (pi then reads the session file), the new entries are appended,
sealed and verified, and a clean source-state.json commits it; a rollback of
that run takes the sidecar away. A session refused before and unchanged
since is not read again (<tree>/.pisess/refused.json). Leftovers of a run that
died holding the tree lock are repaired first, as fsck --repair would.
Every phase is a migration_event.v1 record carrying the run's correlation id
in <tree>/.pisess/journal.jsonl; pisess rollback <correlation id> undoes the
run. --dry-run builds and verifies in a temporary directory outside the tree
and writes nothing in it. Safe for cron: a tree lock keeps runs apart.`,
		Flags: []cli.Flag{
			jsonFlag(),
			jsonProgressFlag(),
			&cli.BoolFlag{Name: "dry-run", Usage: "plan, build and verify outside the tree; write nothing in it"},
			&cli.IntFlag{Name: "jobs", Value: 0, Usage: "sessions staged in parallel (0: number of CPUs); the next ones' first pass (and as many small refreshes in place) and the previous ones' verification and install overlap them"},
			&cli.StringFlag{Name: "correlation-id", Usage: "the run's correlation id (8-128 of A-Z a-z 0-9 . _ : -); default: a new UUID, printed"},
			&cli.BoolFlag{Name: "force", Usage: "rebuild fresh sidecars too, and corrupt or partial ones from the source"},
			&cli.BoolFlag{Name: "strict", Usage: "count sessions the reference refuses as problems (exit 4); by default they are notices"},
			&cli.Int64Flag{Name: "max-segment-bytes", Value: 64 << 20, Usage: "segment rollover size, at most 64 MiB (the most pi reads)"},
			&cli.DurationFlag{Name: "lock-timeout", Value: engine.DefaultLockTimeout, Usage: "how long to wait for a session lock before reporting the session busy"},
			lockWaitFlag(),
			&cli.BoolFlag{Name: "keep-displaced", Usage: "keep every sidecar a refresh replaces in the quarantine, even one reproducible from the source (refreshes then go through a staging copy, never in place)"},
		},
		Action: func(c *cli.Context) error {
			clock, err := ClockFromEnv()
			if err != nil {
				return err
			}
			var bar Progress = NewBytesProgress(r.stderr, -1, "migrating")
			var jp *jsonProgress
			if c.Bool("json-progress") {
				// Machine progress replaces the bar on stderr.
				jp, bar = &jsonProgress{w: r.stderr, command: "migrate", cid: c.String("correlation-id")}, NewBytesProgress(io.Discard, -1, "")
			}
			rep, err := engine.Migrate(r.log.WithContext(c.Context), engine.MigrateOptions{
				Paths:           c.Args().Slice(),
				DryRun:          c.Bool("dry-run"),
				Jobs:            c.Int("jobs"),
				CorrelationID:   c.String("correlation-id"),
				Force:           c.Bool("force"),
				Strict:          c.Bool("strict"),
				MaxSegmentBytes: c.Int64("max-segment-bytes"),
				LockTimeout:     c.Duration("lock-timeout"),
				LockWait:        c.Duration("lock-wait"),
				KeepDisplaced:   c.Bool("keep-displaced"),
				Clock:           clock,
				OnPlan: func(sessions int, bytes int64) {
					if jp != nil {
						jp.plan(sessions, bytes)
						return
					}
					bar = NewBytesProgress(r.stderr, bytes, "migrating")
				},
				OnSession: func(res engine.SessionResult) {
					if jp != nil {
						jp.session(res)
					}
				},
				Progress: func(n int64) {
					bar.Add(int(n))
					if jp != nil {
						jp.bytes(n)
					}
				},
			})
			bar.Finish()
			if jp != nil {
				jp.summary(rep, err)
			}
			if rep.CorrelationID != "" {
				r.report, r.value = rep, rep
				r.text = func(w io.Writer) { renderMigrate(w, rep, r.view) }
				r.logSessions(rep)
			}
			return err
		},
	}, exitStatusHelp(
		"0   every planned session was migrated or refreshed (or nothing to do)",
		"4   some sessions failed, were busy, or need fsck --repair (or, with --strict, were refused)",
		"8   pisess could not run (bad tree, no permission, interrupted)",
		"16  usage error (bad flag, --max-segment-bytes over 64 MiB, bad correlation id)",
		"32  the tree is locked by another pisess run (the holder is named)",
	))
}

func renderMigrate(w io.Writer, rep engine.MigrateReport, v view) {
	mode := "migrate"
	if rep.DryRun {
		mode = "migrate --dry-run (nothing written in the tree)"
	}
	// A dry run's plan first (what a run would change, one line a
	// session), then problems (they need action), then notices (sessions
	// the reference refuses: pi keeps reading them as JSONL), then, with
	// -v, everything else; the summary counts all.
	var plan, problems, notices, others []engine.SessionResult
	for _, s := range rep.Sessions {
		switch {
		case s.Problem(rep.Strict):
			problems = append(problems, s)
		case s.Outcome == engine.OutcomeRefused || s.Healed:
			// A healed sidecar is a repair the run made: said unless -q.
			notices = append(notices, s)
		case rep.DryRun && s.Outcome == engine.OutcomeChecked:
			plan = append(plan, s)
		default:
			others = append(others, s)
		}
	}
	fmt.Fprintf(w, "%s: correlation id %s\n", mode, rep.CorrelationID)
	if !v.quiet && len(plan) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, s := range plan {
			fmt.Fprintf(tw, "would %s\t%s\t%d entries\t%s\t%s\n", s.Action, relTo(rep.Trees, s.Path), s.Entries, size(s.Bytes), relText(rep.Trees, s.Reason))
		}
		tw.Flush()
	}
	rows := problems
	if !v.quiet {
		rows = append(rows, notices...)
	}
	if v.verbose {
		rows = append(rows, others...)
	}
	if len(rows) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "OUTCOME\tACTION\tENTRIES\tSIZE\tSESSION\tREASON")
		for _, s := range rows {
			outcome := string(s.Outcome)
			switch {
			case s.Outcome == engine.OutcomeRefused && !rep.Strict:
				outcome = "notice"
			case s.Healed:
				outcome = "repaired"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", outcome, s.Action, s.Entries, size(s.Bytes), relTo(rep.Trees, s.Path), migrateReason(rep.Trees, s))
			for _, n := range s.Notes {
				fmt.Fprintf(tw, "\t\t\t\t\tnote: %s\n", relText(rep.Trees, n))
			}
		}
		tw.Flush()
	}
	renderSkipped(w, rep.Trees, rep.Skipped, v)
	t := rep.Totals
	parts := []string{fmt.Sprintf("%d session(s)", t.Sessions)}
	for _, kv := range []struct {
		n    int
		name string
	}{{t.Migrated, "migrated"}, {t.Refreshed, "refreshed"}, {t.Healed, "of them damaged and rebuilt (repairs)"}, {t.Verified, "would change (built and verified outside the tree)"}, {t.Skipped, "up to date"},
		{t.NeedsRepair, "need repair"}, {t.Refused, "refused by the reference (notices)"}, {t.Busy, "busy"}, {t.Failed, "failed"},
		{t.Interrupted, "interrupted"}, {t.NotStarted, "not started"}} {
		if kv.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", kv.n, kv.name))
		}
	}
	if rep.Strict && t.Refused > 0 {
		parts = append(parts, "refused sessions count as problems (--strict)")
	}
	fmt.Fprintf(w, "%s; %d entries, %s of frames built\n", strings.Join(parts, ", "), t.Entries, size(t.Bytes))
	if t.NeedsRepair > 0 {
		fmt.Fprintf(w, "repair with: %s\n", engine.RepairHint(rep.Trees))
	}
	if t.Migrated+t.Refreshed > 0 && !rep.DryRun {
		fmt.Fprintf(w, "undo this run with: %s\n", engine.RollbackHint(rep.CorrelationID, rep.Trees))
	}
}

// migrateReason is a session's REASON: for a refusal its line, class and
// reason (the SESSION column names the file), else the error or the
// plan's reason, with paths relative to the tree.
func migrateReason(trees []string, s engine.SessionResult) string {
	switch e := s.Error; {
	case e == nil:
		return relText(trees, s.Reason)
	case s.Outcome == engine.OutcomeRefused && s.Reason != "":
		if e.Line > 0 {
			return fmt.Sprintf("line %d: %s: %s", e.Line, e.Class, relText(trees, s.Reason))
		}
		return fmt.Sprintf("%s: %s", e.Class, relText(trees, s.Reason))
	default:
		return relText(trees, e.Message)
	}
}
