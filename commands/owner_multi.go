package commands

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/ledger"
	"pisess/writers/wire"
)

// Root over the trees of several owners (paths of different users, or
// --all-users): each tree is run by a child of its own, as its owner, one
// tree after another (--jobs stays the sessions of one tree at a time),
// and their reports become one, with one exit status, the most urgent of
// the trees' (WorstExit). A tree that cannot be handed to its owner, or
// whose run fails, is reported and the others still run.
//
// Text: each tree's own report under a "==> TREE (user NAME, uid N) <=="
// line (as head(1) separates files), printed as it runs; then a table of
// every tree with its exit status. With -q a tree that needs nothing
// prints nothing, and the table, when something needs action, lists only
// the trees that do.
//
// --json: one pisess.report.v1 envelope. items and totals are every
// tree's, added up, plus totals.trees and totals.treesFailed (trees that
// could not run: exit 8, 16 or 32), and an item per such tree (class
// "tree", outcome "failed", error). detail is {"trees": [...]}, one
// section per tree in the order run: tree, paths, uid, user, exitStatus,
// correlationId, totals, the command's own report for the tree (detail),
// or error {class, message}.

// treeSection is one tree of a multi-tree report's detail.
type treeSection struct {
	Tree          string           `json:"tree"`
	Paths         []string         `json:"paths"`
	UID           *uint32          `json:"uid,omitempty"`
	User          string           `json:"user,omitempty"`
	ExitStatus    int              `json:"exitStatus"`
	CorrelationID string           `json:"correlationId,omitempty"`
	Totals        map[string]int64 `json:"totals"`
	Detail        json.RawMessage  `json:"detail,omitempty"`
	Error         *reportError     `json:"error,omitempty"`
}

// multiDetail is the detail of a multi-tree report.
type multiDetail struct {
	Trees []treeSection `json:"trees"`
}

// childDoc is what a child printed with --json: a report envelope or an
// error document.
type childDoc struct {
	CorrelationID string           `json:"correlationId"`
	Items         []reportItem     `json:"items"`
	Totals        map[string]int64 `json:"totals"`
	Detail        json.RawMessage  `json:"detail"`
	Error         *struct {
		Class         string `json:"class"`
		Message       string `json:"message"`
		CorrelationID string `json:"correlationId"`
	} `json:"error"`
	Report json.RawMessage `json:"report"`
}

// runTrees runs the command over every tree, each in a child as its
// owner, and prints one report.
func (r *run) runTrees(c *cli.Context, units []*treeUnit, allUsers bool) error {
	defer closeUnits(units)
	r.command, r.started = c.Command.Name, time.Now()
	cid := ""
	if runIDCommands[c.Command.Name] {
		// One run, one id, in every tree's journal.
		if cid = c.String("correlation-id"); cid == "" {
			cid = ledger.NewCorrelationID()
		} else if !ledger.ValidCorrelationID(cid) {
			return engine.Usagef("--correlation-id %q: want 8 to 128 characters of A-Z a-z 0-9 . _ : -", cid)
		}
		r.cid = cid
	}
	r.log.Info().Str("command", c.Command.Name).Int("pid", os.Getpid()).Int("trees", len(units)).Bool("allUsers", allUsers).
		Str("correlationId", cid).Msg("run over several trees started")
	var sections []treeSection
	items, totals := []reportItem{}, map[string]int64{}
	worst, printed, notRun := ExitClean, 0, 0
	for _, u := range units {
		sec := treeSection{Tree: u.root, Paths: u.paths, Totals: map[string]int64{}}
		if u.h != nil {
			uid := u.h.uid
			sec.UID, sec.User = &uid, userName(uid)
		}
		if err := c.Context.Err(); err != nil {
			// Interrupted: the trees left are reported, not run, and
			// said once.
			sec.ExitStatus = ExitOperational
			sec.Error = &reportError{Class: ClassCanceled, Message: fmt.Sprintf("not run: %v", err), File: u.root}
			items = append(items, reportItem{Path: u.root, Class: "tree", Outcome: "failed", Findings: []reportFinding{}, Error: sec.Error})
			worst = WorstExit(worst, sec.ExitStatus)
			sections = append(sections, sec)
			notRun++
			continue
		}
		var failure error
		if u.err != nil {
			failure = u.err
		} else {
			var buf bytes.Buffer
			out := io.Writer(&buf)
			if !r.json {
				out = &headedWriter{w: r.stdout, header: treeHeader(u.root, sec), printed: &printed}
			}
			code, err := r.runAsOwner(c.Context, ownerRun{uid: u.h.uid, gid: u.h.gid, trees: []*os.File{u.h.f},
				args: r.childArgs(c, u.paths, cid), stdout: out})
			switch {
			case err != nil:
				failure = err
			case code == ExitBrokenPipe:
				// The reader of the report left: so does pisess, as
				// the child did.
				r.childExit = ExitBrokenPipe
				return nil
			case code == ExitUsage:
				// The command line is wrong, for every tree alike (the
				// child said why): stop here.
				if r.json {
					_, _ = r.stdout.Write(buf.Bytes())
				}
				r.childExit = ExitUsage
				return nil
			default:
				sec.ExitStatus = code
				if r.json {
					failure = sec.fill(&buf, code, &items, totals)
				}
			}
		}
		if failure != nil {
			if sec.Error == nil {
				sec.ExitStatus = WorstExit(sec.ExitStatus, ExitCode(nil, failure))
				sec.Error = &reportError{Class: errorClass(failure), Message: failure.Error(), File: u.root}
			}
			if !r.json {
				fmt.Fprintf(r.stderr, "pisess: %s\n", failure)
			}
			// The error is on stderr (or in the report): the record is
			// for a log file's history, as endRun's.
			r.log.Info().Str("tree", u.root).Err(failure).Int("exitStatus", sec.ExitStatus).Msg("tree not run")
		}
		if sec.Error != nil {
			items = append(items, reportItem{Path: u.root, Class: "tree", Outcome: "failed", Findings: []reportFinding{}, Error: sec.Error})
		}
		worst = WorstExit(worst, sec.ExitStatus)
		sections = append(sections, sec)
	}
	if notRun > 0 && !r.json {
		fmt.Fprintf(r.stderr, "pisess: %s was interrupted: %d tree(s) not run\n", c.Command.Name, notRun)
	}
	failed := 0
	for _, s := range sections {
		if s.ExitStatus == ExitOperational || s.ExitStatus == ExitUsage || s.ExitStatus == ExitLocked {
			failed++
		}
	}
	r.log.Info().Str("command", c.Command.Name).Int("trees", len(sections)).Int("treesFailed", failed).Int("exitStatus", worst).
		Float64("durationMs", float64(time.Since(r.started).Microseconds())/1000).Msg("run over several trees finished")
	r.childExit = worst
	if r.json {
		totals["trees"], totals["treesFailed"] = int64(len(sections)), int64(failed)
		e := envelope{Schema: ReportSchema, Command: c.Command.Name, CorrelationID: cid, Trees: []string{},
			DryRun: c.Bool("dry-run"), StartedAt: wire.FormatTimestamp(r.started.UTC()), FinishedAt: wire.FormatTimestamp(time.Now().UTC()),
			ExitStatus: worst, Items: items, Totals: totals, Detail: multiDetail{Trees: sections}}
		for _, s := range sections {
			e.Trees = append(e.Trees, s.Tree)
		}
		if len(e.Trees) > 0 {
			e.Tree = e.Trees[0]
		}
		if err := writeJSON(r.stdout, e); err != nil {
			r.childExit = ExitOperational
		}
		return nil
	}
	if r.view.quiet && worst == ExitClean {
		return nil
	}
	if printed > 0 {
		fmt.Fprintln(r.stdout)
	}
	what := c.Command.Name
	if allUsers {
		what += " --all-users"
	}
	fmt.Fprintf(r.stdout, "%s: %d tree(s), exit status %d\n", what, len(sections), worst)
	tw := tabwriter.NewWriter(r.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EXIT\tUSER\tTREE\tRESULT")
	for _, s := range sections {
		if r.view.quiet && s.ExitStatus == ExitClean {
			continue
		}
		who := "-"
		switch {
		case s.User != "":
			who = s.User
		case s.UID != nil:
			who = fmt.Sprintf("uid %d", *s.UID)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.ExitStatus, who, s.Tree, treeResult(s))
	}
	tw.Flush()
	return nil
}

// fill takes a child's --json document into the section, its items and
// totals into the run's.
func (s *treeSection) fill(out *bytes.Buffer, code int, items *[]reportItem, totals map[string]int64) error {
	var doc childDoc
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		return fmt.Errorf("the run as uid %d printed no report (exit %d): %w", *s.UID, code, err)
	}
	if e := doc.Error; e != nil {
		s.CorrelationID, s.Detail = e.CorrelationID, doc.Report
		s.Error = &reportError{Class: e.Class, Message: e.Message, File: s.Tree}
		return nil
	}
	s.CorrelationID, s.Detail = doc.CorrelationID, doc.Detail
	for k, v := range doc.Totals {
		s.Totals[k] = v
		totals[k] += v
	}
	*items = append(*items, doc.Items...)
	return nil
}

// treeResult says in words what a tree's exit status means.
func treeResult(s treeSection) string {
	switch s.ExitStatus {
	case ExitClean:
		return "ok"
	case ExitRepaired:
		return "problems found, all repaired"
	case ExitProblems:
		return "problems left"
	case ExitLocked:
		return "locked by another pisess run"
	case ExitUsage:
		return "usage error"
	}
	if s.Error != nil {
		return "could not run: " + strings.TrimPrefix(s.Error.Message, "tree "+s.Tree+": ")
	}
	return "could not run (its error is above)"
}

func treeHeader(root string, s treeSection) string {
	switch {
	case s.User != "":
		return fmt.Sprintf("==> %s (user %s, uid %d) <==\n", root, s.User, *s.UID)
	case s.UID != nil:
		return fmt.Sprintf("==> %s (uid %d) <==\n", root, *s.UID)
	}
	return fmt.Sprintf("==> %s <==\n", root)
}

// headedWriter writes a tree's header before the first byte of its
// report, so that a tree with nothing to say (-q) prints nothing at all.
type headedWriter struct {
	w       io.Writer
	header  string
	printed *int
	started bool
}

func (h *headedWriter) Write(p []byte) (int, error) {
	if !h.started && len(p) > 0 {
		h.started = true
		sep := ""
		if *h.printed > 0 {
			sep = "\n"
		}
		*h.printed++
		if _, err := io.WriteString(h.w, sep+h.header); err != nil {
			return 0, err
		}
	}
	return h.w.Write(p)
}

// childArgs is the command line of a child run over one tree: this run's
// flags without --all-users, the run's correlation id, and the tree's
// paths.
func (r *run) childArgs(c *cli.Context, paths []string, cid string) []string {
	norm := normalizeArgs(c.App, r.args)
	prefix := norm[:len(norm)-c.Args().Len()]
	var out []string
	for _, a := range prefix {
		if isFlag(a) && flagName(a) == "all-users" {
			continue
		}
		out = append(out, a)
	}
	for len(out) > 0 && out[len(out)-1] == "--" {
		out = out[:len(out)-1]
	}
	if cid != "" && !c.IsSet("correlation-id") {
		out = append(out, "--correlation-id", cid)
	}
	out = append(out, "--")
	return append(out, paths...)
}
