package commands

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/writers/wire"
)

// ProgressSchema names the lines of --json-progress: one JSON object per
// line on stderr, for a supervisor following a long run (as restic's
// --json status lines), published as a JSON Schema (draft 2020-12) in
// progress.v1.schema.json: "message_type" is "plan" once (sessions and
// bytes to do), then "session" as each session ends (with its result and
// the counts so far), then "summary" once, last, whatever happened (the
// run's totals, its exit status, and its error if it failed). bytesDone
// counts the source bytes of the sessions the plan counted in bytesTotal
// (those it migrates or refreshes), so it never passes bytesTotal.
const ProgressSchema = "pisess.progress.v1"

// Message types of ProgressSchema.
const (
	progressPlan    = "plan"
	progressSession = "session"
	progressSummary = "summary"
)

func jsonProgressFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json-progress", Usage: "stream one JSON line per session done on stderr, then a summary (" + ProgressSchema + ")"}
}

type progressLine struct {
	Schema        string           `json:"schema"`
	MessageType   string           `json:"message_type"`
	Command       string           `json:"command"`
	CorrelationID string           `json:"correlationId,omitempty"`
	Time          string           `json:"time"`
	Path          string           `json:"path,omitempty"`
	Action        string           `json:"action,omitempty"`
	Outcome       string           `json:"outcome,omitempty"`
	Error         string           `json:"error,omitempty"`
	Done          int              `json:"done"`
	Total         int              `json:"total"`
	BytesDone     int64            `json:"bytesDone"`
	BytesTotal    int64            `json:"bytesTotal"`
	Totals        map[string]int64 `json:"totals,omitempty"`
	ExitStatus    *int             `json:"exitStatus,omitempty"`
}

// jsonProgress writes progress lines; safe for the worker goroutines.
type jsonProgress struct {
	mu                    sync.Mutex
	w                     io.Writer
	command, cid          string
	done, total           int
	bytesDone, bytesTotal int64
}

func (p *jsonProgress) emit(l progressLine) {
	l.Schema, l.Command, l.CorrelationID, l.Time = ProgressSchema, p.command, p.cid, wire.FormatTimestamp(time.Now().UTC())
	l.Done, l.Total, l.BytesDone, l.BytesTotal = p.done, p.total, p.bytesDone, p.bytesTotal
	b, err := json.Marshal(l)
	if err == nil {
		_, _ = p.w.Write(append(b, '\n'))
	}
}

func (p *jsonProgress) plan(sessions int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total, p.bytesTotal = sessions, bytes
	p.emit(progressLine{MessageType: progressPlan})
}

// bytes counts the source bytes of a session the plan counted, as it ends
// (before its session line).
func (p *jsonProgress) bytes(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bytesDone += n
}

func (p *jsonProgress) session(res engine.SessionResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	l := progressLine{MessageType: progressSession, Path: res.Path, Action: string(res.Action), Outcome: string(res.Outcome)}
	if res.Error != nil {
		l.Error = res.Error.Message
	}
	p.emit(l)
}

// summary is the last line: the run's totals (as the report's), its exit
// status and, when it failed, its error.
func (p *jsonProgress) summary(rep engine.MigrateReport, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rep.CorrelationID != "" {
		p.cid = rep.CorrelationID
	}
	var r engine.Report
	if rep.CorrelationID != "" {
		r = rep
	}
	code := ExitCode(r, err)
	l := progressLine{MessageType: progressSummary, Totals: migrateTotals(rep), ExitStatus: &code}
	if err != nil {
		l.Error = err.Error()
	}
	p.emit(l)
}
