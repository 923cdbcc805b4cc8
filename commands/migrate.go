package commands

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/rollback"
)

func migrateCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "migrate",
		Usage:     "migrate session trees to V2 sidecars (plan, stage, verify, cut over)",
		ArgsUsage: "[PATH...]",
		Description: `Migrates every session under PATH (a session file or a directory tree; with
none, $PI_SESSIONS_DIR, else $PI_CODING_AGENT_DIR/sessions, else
~/.pi/agent/sessions) to a Session Store V2 sidecar <stem>.v2 beside it.
Sessions are found by extension and header (.jsonl, .sqlite), never by the
shape of their names; no symlink is followed.

Each session gets one action: migrate (no sidecar), refresh (the sidecar is
stale: pi wrote the session since — the everyday job of a cron run; or it is
corrupt or partial in a way a rebuild from the source mends — frames, index,
manifest, a missing part — found by a status at least as deep as pi's own
open of it: the run heals it, keeps the damaged sidecar in its quarantine,
journals a repair and counts it healed, exit 0 when the rebuild succeeds),
skip (fresh; --force rebuilds it), needs_repair (a sidecar damaged in a way
only fsck decides — modes, owner, a symlink or special file, a pending
rollback — or leftovers of an interrupted run this run did not heal: left
for pisess fsck --repair; --force rebuilds from the source instead), busy
(the session lock is held: pi is writing it, or rebuilding its sidecar beside
it) or refuse (the reference
cannot migrate it: a custom_message entry, a lone surrogate, a missing
parent, a version 1 or 2 header (see pisess upgrade), a symlinked session
file, a tree under a symlinked directory, a .sqlite whose stem also has a
.jsonl; the class, file, line and reason are printed as a notice, pi keeps
reading the session as JSONL, and it does not change the exit status unless
--strict).

Per session, under the session lock <file>.lock (the flock pi takes; a
session still locked after --lock-timeout is reported busy, as is a SQLite
database another process keeps locked, and the sessions after it are migrated
meanwhile): the store is built in
<stem>.v2.staging.<uuid> from one read of the source, verified against what
that read produced (every frame's CRC, entry ids, parents and types in order,
the hash chain, index, manifest, invariants INV-001..INV-007, pi's acceptance
rules including modes and owner, the source unchanged since it was read),
given its migration ledger and a clean source-state.json, sealed, and renamed
into <stem>.v2. Directories are 0700 and files 0600 whatever the umask; run as
root over another user's tree, everything pisess creates belongs to the
session file's owner (a root-owned sidecar would break pi's open). A .sqlite
session migrates with sourceFormat sqlite_v1; pi's resume reads the sidecars
of JSONL sessions only, which the report notes, so pi never judges a SQLite
sidecar's freshness: pisess does, by the database file's fingerprint and by
its write-ahead log (a <file>.sqlite-wal modified after the sidecar's
source-state.json, or less than 2 s before it, holds commits the database
file does not have yet, and makes the sidecar stale).

A source written while it is read (a writer that ignores pi's session lock)
fails the same way wherever the run notices it (reading it, comparing the
store with it, just before the cutover): class source_changed, one message,
journaled failed with io_failure and recoverable_error; nothing is installed
or remembered, and the next run reads it again.

Refresh. pi only ever appends whole lines to a session, and marks its sidecar
dirty when it does. When the session still begins with exactly the bytes
pisess built the sidecar from (<tree>/.pisess/refresh.json says which) and
only whole new lines follow, the sidecar is continued in place, under the
session lock and the store's store.mutation.lock: the new entries are read
and checked, the journal records the cutover, the sidecar is marked dirty
(from then until the end pi reads the session file), the new frames and index
rows are appended, the manifest and the store's ledger rewritten, everything
verified and sealed, and a clean source-state.json commits it. The result is
byte for byte the store a full rebuild writes. A crash, a power loss or an
error part way leaves the sidecar dirty or stale, never clean, and the next
run rebuilds it. The old frames are CRC-checked; not read at all where every
file of the sidecar is as pisess last left it (pi appended without marking
it dirty); read for their links when a new entry branches from an earlier
one. Anything else is a full rebuild, as a migration is: no refresh record or one that does not match, a changed
prefix, a torn last line, a damaged old store, a new entry that refers
forward, more than 16 MiB of new payloads, a store.mutation.lock another
process holds, or --keep-displaced.

Displaced sidecars. A sidecar that a full rebuild replaces is moved to
<tree>/.pisess/quarantine/<correlation id>/. It is not kept (a discarded
note in the journal) when it is reproducible: pisess built
it, for a run this tree's journal or refresh record knows, and the session
file still begins with the bytes it was built from; so cron refreshes do not
grow the disk. A SQLite database never keeps the bytes a sidecar was built
from (pages are rewritten): its displaced sidecar is reproducible when the
database still holds its entries (the same session id, and a manifest whose
entry count and chain are the new build's after as many entries). A sidecar
pisess did not build, a corrupt one (a heal's), or one whose source was
rewritten rather than appended to stays in the quarantine;
--keep-displaced keeps every one. pisess rollback <correlation id> undoes the
run: the sidecars it installed or continued go to the quarantine, the ones it
displaced and kept come back; where it kept none, pi reads the session file
until the next migrate, as it did while the old sidecar was stale. A rollback
of a run whose sidecar a later run continued is refused as superseded (roll
the later run back first).

One tree, one journal. Every PATH is resolved to its tree's root: the nearest
directory at or above it that holds .pisess/, else the default tree when the
path lies under it, else the parent of a pi cwd directory (--<cwd>--), else
the directory itself. A run on a subdirectory uses its tree's one journal,
tree lock and quarantine, so runs on overlapping paths exclude each other
(the second exits 32 naming the holder, or waits up to --lock-wait). A run
plans only from what it sees while it holds the tree lock: when another run
changed the tree meanwhile (or the lock was waited for, or a heal ran), it
walks the tree and reads its state files again. A run writes its holder text
(pid, host, start, run id) into .pisess/lock only before it first changes the
tree and clears it at the end, so a run with nothing to do leaves the file
untouched. Printed hints (pisess rollback --tree T ID, pisess fsck --repair
T) always carry the tree, absolute and shell-quoted, so that they run as
printed from any directory and shell.

Nothing redone. A run with nothing to do writes nothing: no journal record,
no file in the tree, not even a session's lock file. A session the reference
refused is remembered in <tree>/.pisess/refused.json by its file identity
(device, inode, size, modification and change times) and reported refused
from there, not read, locked or journaled, until the file changes. Only the
reference's verdicts on the session's bytes are remembered: an I/O or
resource error (EACCES, EIO, EMFILE, a full or missing TMPDIR) or a database
another process holds locked is a failure of the run (counted, exit 4, read
again by the next run). A sidecar
found fresh by a status at least as deep as pi's own open of it (up to
10,000 entries every frame read and checked, as pi's open reads them all;
above, every index row against its segment, each segment's bytes exactly
covered, the manifest against the index and the last frame of every
segment), or installed or continued by a run on a file system whose change
times show every change (Linux 6.13 and later on ext4, xfs, btrfs and tmpfs;
probed once per run), is remembered in <tree>/.pisess/fresh.json by a digest
of the metadata of every file of the sidecar and of the session file; the
next run skips it with one lstat per file, and when only the session file
changed it reads the session and not the sidecar. Any write, chmod, chown,
rename, link or new file moves a change time the digests cover; what changed
within 2 s of a run's start is judged again by the next run (git's racily
clean rule); a system clock stepped back by more than 2 s while a run plans is
the one change this cannot see. These files only save work: each entry is
checked against the files it names, nothing in them is an address, and a
file written by another pisess build (its "pisess" stamp) is ignored.

Self-healing. A run that takes over the tree lock of a pisess run that died
holding it (a reboot, the OOM killer, kill -9) first repairs the staging and
backup directories that run left, exactly as fsck --repair would (journaled
under a run id of its own, healed in --json), then goes on: the next cron run
converges with no operator. Otherwise it takes only what is recognisably
pisess's (a backup named after a run the journal knows, a staging store whose
ledger holds a phase only pisess writes); anything else is needs_repair.

Every phase (planned, staging_copy, integrity_check, cutover_commit,
completed, or failed with its errorClass) is a migration_event.v1 record
carrying the run's correlation id in <tree>/.pisess/journal.jsonl; the
store's own migrations/ledger.jsonl holds the events of its migration. An
interrupted session (SIGINT, SIGTERM) is journaled failed, outcome
recoverable_error, class io_failure: the run stopped for a reason outside the
data; run it again. --dry-run builds and verifies in a temporary directory
outside the tree and writes nothing in it.

Example: from a crontab, silent unless something needs you:
   */15 * * * * /usr/local/bin/pisess migrate -q --log-format json`,
		Flags: []cli.Flag{
			jsonFlag(),
			jsonProgressFlag(),
			&cli.BoolFlag{Name: "dry-run", Usage: "plan, build and verify outside the tree; write nothing in it"},
			&cli.IntFlag{Name: "jobs", Value: 0, Usage: "sessions staged in parallel (0: number of CPUs); the next ones' first pass (and as many small refreshes in place) and the previous ones' verification and install overlap them"},
			&cli.StringFlag{Name: "correlation-id", Usage: "the run's correlation id (8-128 of A-Z a-z 0-9 . _ : -); default: a new UUID, printed"},
			&cli.BoolFlag{Name: "force", Usage: "rebuild fresh sidecars too, and corrupt or partial ones from the source"},
			&cli.BoolFlag{Name: "strict", Usage: "count sessions the reference refuses as problems (exit 4); by default they are notices"},
			&cli.Int64Flag{Name: "max-segment-bytes", Value: 64 << 20, Usage: "segment rollover size, at most 64 MiB (the most pi reads)"},
			&cli.DurationFlag{Name: "lock-timeout", Value: rollback.DefaultLockTimeout, Usage: "how long to wait for a session lock before reporting the session busy"},
			lockWaitFlag(),
			&cli.BoolFlag{Name: "keep-displaced", Usage: "keep every sidecar a refresh replaces in the quarantine, even one reproducible from the source (refreshes are then full rebuilds, never in place)"},
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
		fmt.Fprintf(w, "repair with: %s\n", repairHint(rep.Trees))
	}
	if t.Migrated+t.Refreshed > 0 && !rep.DryRun {
		fmt.Fprintf(w, "undo this run with: %s\n", rollbackHint(rep.CorrelationID, rep.Trees))
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
