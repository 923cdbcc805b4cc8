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
// --json status lines): "message_type" is "plan" once (sessions and bytes
// to do), then "session" as each session ends (with its result and the
// counts so far).
const ProgressSchema = "pisess.progress.v1"

func jsonProgressFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json-progress", Usage: "stream one JSON line per session done on stderr (" + ProgressSchema + ")"}
}

type progressLine struct {
	Schema        string `json:"schema"`
	MessageType   string `json:"message_type"`
	Command       string `json:"command"`
	CorrelationID string `json:"correlationId,omitempty"`
	Time          string `json:"time"`
	Path          string `json:"path,omitempty"`
	Action        string `json:"action,omitempty"`
	Outcome       string `json:"outcome,omitempty"`
	Error         string `json:"error,omitempty"`
	Done          int    `json:"done"`
	Total         int    `json:"total"`
	BytesDone     int64  `json:"bytesDone"`
	BytesTotal    int64  `json:"bytesTotal"`
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
	p.emit(progressLine{MessageType: "plan"})
}

func (p *jsonProgress) session(res engine.SessionResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.bytesDone += res.SourceBytes
	l := progressLine{MessageType: "session", Path: res.Path, Action: string(res.Action), Outcome: string(res.Outcome)}
	if res.Error != nil {
		l.Error = res.Error.Message
	}
	p.emit(l)
}
