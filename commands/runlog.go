package commands

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/ledger"
)

// Every run that acts on trees logs a start record (command, correlation
// id, paths, pid) and a summary record (counts, duration, exit status);
// migrate also logs one record per session it changed or failed on. With
// --log-format json each record is one JSON object per line, so a log file
// (--log-file) is the history of the cron runs.

// runIDCommands have a correlation id that the command line may fix
// (--correlation-id) and that is otherwise drawn here, before the run, so
// that the start record and a cancel message can name it.
var runIDCommands = map[string]bool{"migrate": true, "upgrade": true}

// startRun logs the start record; for commands with a run id it returns
// the id the run will use.
func (r *run) startRun(c *cli.Context) string {
	r.started = time.Now()
	r.command = c.Command.Name
	cid := ""
	if runIDCommands[c.Command.Name] {
		cid = c.String("correlation-id")
		if cid == "" {
			cid = ledger.NewCorrelationID()
		}
	} else if c.Command.Name == "rollback" && c.Args().Len() == 1 && c.Uint64("to-checkpoint") == 0 {
		cid = c.Args().First()
	}
	r.cid = cid
	ev := r.log.Info().Str("command", c.Command.Name).Int("pid", os.Getpid()).Strs("paths", c.Args().Slice())
	if cid != "" {
		ev = ev.Str("correlationId", cid)
	}
	if c.Bool("dry-run") {
		ev = ev.Bool("dryRun", true)
	}
	ev.Msg("run started")
	return cid
}

// endRun logs the summary record.
func (r *run) endRun(code int, err error) {
	if r.command == "" {
		return // not a tree command, or it never started
	}
	// Info whatever the outcome: the error itself is printed on stderr,
	// and the exit status is in the record for a log file.
	ev := r.log.Info().Str("command", r.command).Int("exitStatus", code).
		Float64("durationMs", float64(time.Since(r.started).Microseconds())/1000)
	if r.cid != "" {
		ev = ev.Str("correlationId", r.cid)
	}
	if rep := r.report; rep != nil {
		t := rep.Tally()
		ev = ev.Int("problems", t.Problems).Int("repaired", t.Repaired)
	}
	if m, ok := r.report.(engine.MigrateReport); ok {
		t := m.Totals
		ev = ev.Int("sessions", t.Sessions).Int("migrated", t.Migrated).Int("refreshed", t.Refreshed).
			Int("upToDate", t.Skipped).Int("refused", t.Refused).Int("needsRepair", t.NeedsRepair).
			Int("busy", t.Busy).Int("failed", t.Failed).Int("interrupted", t.Interrupted).Int("notStarted", t.NotStarted).Uint64("frameBytes", t.Bytes).Int64("sourceBytes", t.SourceBytes)
	}
	if err != nil {
		ev = ev.Str("error", err.Error()).Str("errorClass", errorClass(err))
	}
	ev.Msg("run finished")
}

// logSessions logs one record per session a migrate run changed or
// failed on; sessions with nothing done are only counted.
func (r *run) logSessions(rep engine.MigrateReport) {
	for _, s := range rep.Sessions {
		var ev *zerolog.Event
		switch {
		case s.Problem(rep.Strict):
			ev = r.log.Warn()
		case s.Outcome == engine.OutcomeDone:
			ev = r.log.Info()
		default:
			continue
		}
		ev = ev.Str("correlationId", rep.CorrelationID).Str("session", s.Path).Str("action", string(s.Action)).
			Str("outcome", string(s.Outcome)).Uint64("entries", s.Entries).Uint64("frameBytes", s.Bytes)
		if s.Error != nil {
			ev = ev.Str("errorClass", s.Error.Class).Str("error", s.Error.Message)
		}
		ev.Msg("session")
	}
}

// canceled turns an interrupt into the message the operator needs: which
// run stopped, and how to finish or undo what it did.
func (r *run) canceled(err error) error {
	if r.cid == "" || !(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	hint := ""
	if r.command == "migrate" || r.command == "upgrade" {
		var trees []string
		switch rep := r.report.(type) {
		case engine.MigrateReport:
			trees = rep.Trees
		case upgradeReport:
			trees = rep.Trees
		}
		hint = fmt.Sprintf("; what it finished is journaled: run it again to finish, or undo it with `%s`", rollbackHint(r.cid, trees))
		if len(trees) == 0 {
			// Stopped before it had its trees: it changed nothing.
			hint = "; it stopped before it migrated anything"
		}
	}
	return &canceledError{err: err, msg: fmt.Sprintf("run %s (%s) was interrupted%s: %v", r.cid, r.command, hint, err)}
}

// canceledError is an interrupted run, named.
type canceledError struct {
	err error
	msg string
}

func (e *canceledError) Error() string { return e.msg }
func (e *canceledError) Unwrap() error { return e.err }
