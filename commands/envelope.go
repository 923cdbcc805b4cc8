package commands

import (
	"sort"
	"time"

	"pisess/commands/engine"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/upgrade"
	"pisess/writers/wire"
)

// ReportSchema names the one shape of every command's --json document
// (report.v1.schema.json, draft 2020-12): an envelope that says which
// command ran, on which trees, when, with which exit status; the items in
// one shape whatever the command (path, sourceFormat, action, outcome,
// class, findings, error); totals with every count, zeros included; and
// the command's full report under detail.
const ReportSchema = "pisess.report.v1"

type envelope struct {
	Schema        string           `json:"schema"`
	Command       string           `json:"command"`
	CorrelationID string           `json:"correlationId,omitempty"`
	Tree          string           `json:"tree"`
	Trees         []string         `json:"trees"`
	DryRun        bool             `json:"dryRun"`
	StartedAt     string           `json:"startedAt"`
	FinishedAt    string           `json:"finishedAt"`
	ExitStatus    int              `json:"exitStatus"`
	Items         []reportItem     `json:"items"`
	Totals        map[string]int64 `json:"totals"`
	Detail        any              `json:"detail"`
}

// reportItem is one session, file, store or run, under the same key names
// in every command: a member means the same wherever it appears (a run's
// correlation id and command have members of their own).
type reportItem struct {
	Path         string `json:"path"`
	SourceFormat string `json:"sourceFormat,omitempty"`
	Action       string `json:"action,omitempty"`
	Outcome      string `json:"outcome,omitempty"`
	Class        string `json:"class,omitempty"`
	// A run (runs, prune): its correlation id, the command it was, and
	// the times of its first and last records, as the envelope's own.
	CorrelationID string          `json:"correlationId,omitempty"`
	Command       string          `json:"command,omitempty"`
	StartedAt     string          `json:"startedAt,omitempty"`
	FinishedAt    string          `json:"finishedAt,omitempty"`
	RolledBack    *bool           `json:"rolledBack,omitempty"`
	Findings      []reportFinding `json:"findings"`
	Error         *reportError    `json:"error,omitempty"`
}

type reportFinding struct {
	Code     string `json:"code"`
	Path     string `json:"path,omitempty"`
	Line     int64  `json:"line,omitempty"`
	Detail   string `json:"detail"`
	Notice   bool   `json:"notice,omitempty"`
	Repaired bool   `json:"repaired,omitempty"`
}

type reportError struct {
	Class   string `json:"class"`
	Message string `json:"message"`
	File    string `json:"file,omitempty"`
	Line    int64  `json:"line,omitempty"`
}

// newEnvelope wraps the report of the command that ran.
func (r *run) newEnvelope(code int) envelope {
	e := envelope{
		Schema: ReportSchema, Command: r.command, CorrelationID: r.cid,
		StartedAt:  wire.FormatTimestamp(r.started.UTC()),
		FinishedAt: wire.FormatTimestamp(time.Now().UTC()),
		ExitStatus: code, Items: []reportItem{}, Trees: []string{}, Totals: map[string]int64{},
		Detail: r.value,
	}
	value := r.value
	if ij, ok := value.(inspectJSON); ok {
		value = ij.inspectReport // inspect's document wraps its report
	}
	switch rep := value.(type) {
	case engine.MigrateReport:
		e.CorrelationID, e.DryRun, e.Trees = rep.CorrelationID, rep.DryRun, rep.Trees
		for _, s := range rep.Sessions {
			it := reportItem{Path: s.Path, SourceFormat: s.SourceFormat, Action: string(s.Action), Outcome: string(s.Outcome), Findings: notes(s.Notes)}
			if s.Error != nil {
				it.Error = &reportError{Class: s.Error.Class, Message: s.Error.Message, File: s.Path, Line: s.Error.Line}
			}
			e.Items = append(e.Items, it)
		}
		e.Totals = migrateTotals(rep)
	case statusReport:
		for _, t := range rep.Trees {
			e.Trees = append(e.Trees, t.Root)
		}
		for _, s := range rep.Sessions {
			it := reportItem{Path: s.Path, SourceFormat: s.SourceFormat, Class: string(s.Class), Findings: []reportFinding{}}
			if s.Reason != "" {
				it.Findings = append(it.Findings, reportFinding{Code: "status." + string(s.Class), Path: s.Path, Detail: s.Reason})
			}
			if s.Error != "" {
				it.Error = &reportError{Class: "operational", Message: s.Error, File: s.Path}
			}
			e.Items = append(e.Items, it)
		}
		e.Totals = classCounts(rep.Totals)
		e.Totals["sessions"] = int64(len(rep.Sessions))
	case verifyReport:
		e.Trees = rep.Trees
		for _, s := range rep.Sessions {
			it := reportItem{Path: s.Path, SourceFormat: s.SourceFormat, Findings: []reportFinding{}}
			switch {
			case s.Skipped:
				it.Outcome = "skipped"
			case s.Verified:
				it.Outcome = "verified"
			case s.Stale:
				it.Outcome, it.Class = "stale", string(verify.ClassStale)
			default:
				it.Outcome = "failed"
			}
			for _, f := range s.Findings {
				it.Findings = append(it.Findings, reportFinding{Code: f.Code, Path: f.Path, Line: f.Line, Detail: f.Detail})
			}
			if s.Error != "" && !s.Skipped {
				it.Error = &reportError{Class: "verify", Message: s.Error, File: s.Path}
			}
			e.Items = append(e.Items, it)
		}
		e.Totals = counts("sessions", len(rep.Sessions), "verified", rep.Verified, "stale", rep.Stale, "failed", rep.Failed,
			"skipped", len(rep.Sessions)-rep.Verified-rep.Stale-rep.Failed)
	case fsckReport:
		e.CorrelationID = rep.CorrelationID
		for _, t := range rep.Trees {
			e.Trees = append(e.Trees, t.Root)
			if len(t.Findings) > 0 {
				e.Items = append(e.Items, reportItem{Path: t.Root, Class: "tree", Findings: fsckFindings(t.Findings)})
			}
			for _, s := range t.Sessions {
				class := s.Class
				if s.After != "" {
					class = s.After
				}
				e.Items = append(e.Items, reportItem{Path: s.Path, SourceFormat: s.Format, Class: string(class), Findings: fsckFindings(s.Findings)})
			}
		}
		t := rep.Totals
		e.Totals = classCounts(t.Classes)
		for k, v := range counts("sessions", t.Sessions, "problems", t.Problems, "repaired", t.Repaired, "left", t.Left, "notices", t.Notices) {
			e.Totals[k] = v
		}
	case rollbackReport:
		e.CorrelationID, e.DryRun = rep.CorrelationID, rep.DryRun
		n := map[string]int{}
		for _, s := range rep.Sessions {
			e.Trees = appendOnce(e.Trees, s.Tree)
			it := reportItem{Path: s.Session, Action: s.Action, Outcome: "ok", Findings: []reportFinding{}}
			if s.Error != "" {
				it.Outcome = "left"
				it.Error = &reportError{Class: s.Action, Message: s.Error, File: s.Session}
			}
			n[s.Action]++
			e.Items = append(e.Items, it)
		}
		for _, f := range rep.Forged {
			e.Trees = appendOnce(e.Trees, f.Tree)
			e.Items = append(e.Items, reportItem{Path: f.Journal, Outcome: "refused", Findings: []reportFinding{{Code: verify.CodeTreeJournal, Path: f.Journal, Line: f.Line, Detail: f.Detail}},
				Error: &reportError{Class: "forged", Message: f.Detail, File: f.Journal, Line: f.Line}})
		}
		e.Totals = counts("sessions", len(rep.Sessions), "rolledBack", n["rolled-back"], "alreadyRolledBack", n["already-rolled-back"],
			"nothingInstalled", n["nothing-installed"], "wouldRollBack", n["would-roll-back"], "refused", n["refused"],
			"busy", n["busy"], "failed", n["failed"], "forged", len(rep.Forged))
		if c := rep.Checkpoint; c != nil {
			e.Items = append(e.Items, reportItem{Path: c.Store, Action: "rollback-to-checkpoint", Outcome: "ok", Findings: []reportFinding{}})
		}
	case upgradeReport:
		e.CorrelationID, e.DryRun, e.Trees = rep.CorrelationID, rep.DryRun, rep.Trees
		for _, f := range rep.Files {
			it := reportItem{Path: f.Path, SourceFormat: "jsonl_v3", Action: "upgrade", Outcome: string(f.Status), Findings: []reportFinding{}}
			if p := f.Problem; p != nil {
				if f.Status == upgrade.StatusSkipped || f.Status == upgrade.StatusCurrent {
					it.Findings = append(it.Findings, reportFinding{Code: "upgrade." + string(p.Class), Path: f.Path, Line: p.Line, Detail: p.Reason, Notice: true})
				} else {
					it.Error = &reportError{Class: string(p.Class), Message: p.Reason, File: f.Path, Line: p.Line}
				}
			}
			e.Items = append(e.Items, it)
		}
		t := rep.Totals
		e.Totals = counts("files", t.Files, "upgraded", t.Upgraded, "wouldUpgrade", t.Planned, "alreadyV3", t.Current,
			"skipped", t.Skipped, "refused", t.Refused, "busy", t.Busy, "changed", t.Changed, "failed", t.Failed,
			"notMigratable", t.NotMigratable, "skippedEntries", len(rep.Skipped))
	case inspectReport:
		it := reportItem{Path: rep.Store, Class: "store", Findings: []reportFinding{}}
		for _, p := range rep.Problems {
			it.Findings = append(it.Findings, reportFinding{Code: "store." + p.Class, Path: p.File, Line: p.Line, Detail: p.Detail})
		}
		e.Items = append(e.Items, it)
		c := rep.Counts
		e.Totals = counts("problems", len(rep.Problems), "entries", int(c.Entries), "messages", int(c.Messages), "branches", int(c.Branches),
			"compactions", int(c.Compactions), "segments", int(c.Segments), "checkpoints", int(c.Checkpoints), "ledgerEvents", int(c.LedgerEvents))
		e.Totals["bytes"] = int64(c.Bytes)
	case buildReport:
		e.Items = append(e.Items, reportItem{Path: rep.Session, SourceFormat: rep.SourceFormat, Action: "build", Outcome: "ok", Findings: []reportFinding{}})
		e.Totals = counts("entries", int(rep.Entries), "segments", int(rep.Segments))
		e.Totals["bytes"] = int64(rep.Bytes)
	case runsReport:
		runs, rolled := 0, 0
		for _, t := range rep.Trees {
			e.Trees = append(e.Trees, t.Root)
			for _, rn := range t.Runs {
				rolledBack := rn.RolledBack
				e.Items = append(e.Items, reportItem{Path: t.Root, CorrelationID: rn.CorrelationID, Command: rn.Command,
					StartedAt: rn.Start, FinishedAt: rn.End, RolledBack: &rolledBack, Findings: []reportFinding{}})
				runs++
				if rolledBack {
					rolled++
				}
			}
		}
		e.Totals = counts("runs", runs, "rolledBack", rolled)
	case pruneReport:
		e.DryRun = rep.DryRun
		var runs, entries, lines int
		var bytes int64
		for _, t := range rep.Trees {
			e.Trees = append(e.Trees, t.Root)
			outcome := "pruned"
			if rep.DryRun {
				outcome = "would-prune"
			}
			for _, id := range t.Runs {
				e.Items = append(e.Items, reportItem{Path: t.Root, CorrelationID: id, Action: "prune", Outcome: outcome, Findings: []reportFinding{}})
			}
			runs, entries, lines, bytes = runs+len(t.Runs), entries+len(t.Quarantine), lines+t.JournalLines, bytes+t.Bytes
		}
		e.Totals = counts("runs", runs, "quarantineEntries", entries, "journalLines", lines)
		e.Totals["bytes"] = bytes
	}
	var skipped []discover.Skipped
	switch rep := r.value.(type) {
	case engine.MigrateReport:
		skipped = rep.Skipped
	case upgradeReport:
		skipped = rep.Skipped
	case statusReport:
		skipped = rep.Skipped
	case verifyReport:
		skipped = rep.Skipped
	case fsckReport:
		for _, t := range rep.Trees {
			skipped = append(skipped, t.Skipped...)
		}
	}
	if skipped != nil {
		for _, sk := range skipped {
			e.Items = append(e.Items, reportItem{Path: sk.Path, Outcome: "skipped", Class: string(sk.Kind),
				Findings: []reportFinding{{Code: "discover." + string(sk.Kind), Path: sk.Path, Detail: sk.Reason, Notice: true}}})
		}
		e.Totals["skippedEntries"] = int64(len(skipped))
	}
	if len(e.Trees) > 0 {
		e.Tree = e.Trees[0]
	}
	return e
}

// migrateTotals are migrate's totals, in its report and its progress
// summary.
func migrateTotals(rep engine.MigrateReport) map[string]int64 {
	t := rep.Totals
	m := counts("sessions", t.Sessions, "migrated", t.Migrated, "refreshed", t.Refreshed, "verified", t.Verified,
		"skipped", t.Skipped, "needsRepair", t.NeedsRepair, "refused", t.Refused, "busy", t.Busy, "failed", t.Failed,
		"interrupted", t.Interrupted, "notStarted", t.NotStarted, "healed", t.Healed, "skippedEntries", len(rep.Skipped))
	m["entries"], m["bytes"], m["sourceBytes"] = int64(t.Entries), int64(t.Bytes), t.SourceBytes
	return m
}

func counts(kv ...any) map[string]int64 {
	m := map[string]int64{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = int64(kv[i+1].(int))
	}
	return m
}

// classCounts counts every status class, zeros included.
func classCounts(by map[verify.Class]int) map[string]int64 {
	m := map[string]int64{}
	for _, c := range []verify.Class{verify.ClassMigrated, verify.ClassStale, verify.ClassUnmigrated, verify.ClassCorrupt, verify.ClassPartial} {
		m[string(c)] = int64(by[c])
	}
	var others []string
	for c := range by {
		if _, ok := m[string(c)]; !ok {
			others = append(others, string(c))
		}
	}
	sort.Strings(others)
	for _, c := range others {
		m[c] = int64(by[verify.Class(c)])
	}
	return m
}

func notes(ns []string) []reportFinding {
	out := []reportFinding{}
	for _, n := range ns {
		out = append(out, reportFinding{Code: "note", Detail: n, Notice: true})
	}
	return out
}

func fsckFindings(fs []verify.FsckFinding) []reportFinding {
	out := []reportFinding{}
	for _, f := range fs {
		out = append(out, reportFinding{Code: f.Code, Path: f.Path, Line: f.Line, Detail: f.Detail, Notice: f.Notice, Repaired: f.Repaired})
	}
	return out
}

func appendOnce(xs []string, x string) []string {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}
