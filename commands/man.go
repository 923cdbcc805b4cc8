package commands

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// The man page, pisess(1), written in roff from the command definitions:
// the same usage lines, descriptions, flags (with their defaults, words
// and environment variables) and exit statuses as --help, plus the
// sections a man page has and --help has not: those of manual.go
// (conventions, logs and metrics, several users' trees, security), EXIT
// STATUS, ENVIRONMENT, FILES. Text is escaped for roff here, once (a "<stem>.v2/" must reach
// the reader whole, a line must not begin with a control character).

// files is the FILES section: what pisess reads and writes, and where. A
// test holds each name to the constant of the package that owns it.
var files = []struct{ path, meaning string }{
	{"~/.pi/agent/sessions/", "the default session tree (pi's own), when no tree is given and neither " +
		EnvSessionsDir + " nor " + EnvAgentDir + " is set."},
	{"<tree>/--<cwd>--/<stem>.jsonl", "a session, written by pi (or <stem>.sqlite, a session database). " +
		"pisess never changes it, except pisess upgrade, which rewrites a version 1 or 2 file as version 3 " +
		"after copying the original to the quarantine."},
	{"<stem>.jsonl.lock", "the session lock (<session file>.lock), pi's, which pisess takes too while it " +
		"works on the session."},
	{"<stem>.v2/", "the session's V2 sidecar, as the reference writes it: manifest.json, " +
		"segments/<16 digits>.seg, index/offsets.jsonl, checkpoints/, migrations/ledger.jsonl (this store's " +
		"migration events), source-state.json (the source's fingerprint), tmp/ and store.mutation.lock; " +
		"directories 0700, files 0600, owned by the session's owner."},
	{"<stem>.v2.staging.<uuid>/", "a sidecar being built; left by a run that died, it is quarantined by " +
		"pisess fsck --repair (or the next migrate)."},
	{"<stem>.v2.backup.<uuid>/", "a displaced sidecar, kept until the install of its successor is durable; " +
		"left by a run that died, pisess fsck --repair restores or quarantines it."},
	{"<tree>/.pisess/", "pisess's own directory in each tree, owned by the tree's owner (0700). Nothing " +
		"outside a tree is ever written."},
	{"<tree>/.pisess/journal.jsonl", "the tree journal: every phase of every run (migration_event.v1) and " +
		"pisess's notes, with the run's correlation id; pisess runs and rollback read it, prune trims it."},
	{"<tree>/.pisess/lock", "the tree lock: one changing pisess run at a time (another exits 32, or waits " +
		"with --lock-wait)."},
	{"<tree>/.pisess/quarantine/<correlation id>/", "what a run displaced, repaired away or rolled back, " +
		"under the tree-relative path it had; deleted only by pisess prune."},
	{"<tree>/.pisess/refused.json", "the sessions the reference refused, not read again until they change."},
	{"<tree>/.pisess/refresh.json", "for each sidecar pisess installed, the source bytes it was built from, " +
		"so that a refresh appends only what pi appended since."},
	{"<tree>/.pisess/fresh.json", "the fresh cache: file metadata of sessions found fresh, so that a cron " +
		"run skips them with one lstat per file."},
	{"<tree>/.pisess/pruning/", "what a prune under way is deleting; left by a prune that died, the next " +
		"one removes it."},
}

func manCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:  "man",
		Usage: "print the man page (roff), made from the command definitions",
		Description: `Prints pisess(1) in roff, generated from the same definitions as --help:
   pisess man > pisess.1 && man -l pisess.1`,
		Action: func(c *cli.Context) error {
			page := manPage(c.App)
			r.text = func(w io.Writer) { io.WriteString(w, page) }
			return nil
		},
	}, exitStatusHelp("0   printed"))
}

// manPage writes pisess(1).
func manPage(app *cli.App) string {
	var m manWriter
	v := versionInfo()
	date := ""
	if len(v.Time) >= 10 {
		date = v.Time[:10]
	}
	m.raw(fmt.Sprintf(".TH PISESS 1 %s %s \"User Commands\"", quoteArg(date), quoteArg("pisess "+v.Version)))
	// No hyphenation and a ragged right edge: paths and flags are typed
	// from the page, and a hyphen a line break added would be typed too.
	m.raw(".nh")
	m.raw(".ad l")
	m.section("NAME")
	m.text("pisess - " + app.Usage)

	m.section("SYNOPSIS")
	m.raw(`.B pisess`)
	m.raw(`[\fIglobal options\fR] \fIcommand\fR [\fIcommand options\fR] [\fIarguments\fR ...]`)

	m.section("DESCRIPTION")
	m.block(app.Description)
	m.para("Commands:")
	for _, c := range app.Commands {
		if !c.Hidden {
			m.item(`\fB`+esc(c.Name)+`\fR`, c.Usage)
		}
	}

	m.section("GLOBAL OPTIONS")
	// Once the app runs, urfave/cli has added --help and --version.
	m.flags(app.Flags)

	m.section("COMMANDS")
	for _, c := range app.Commands {
		if c.Hidden {
			continue
		}
		// The command that runs (man) has urfave/cli's --help too.
		flags := slices.DeleteFunc(slices.Clone(c.Flags), func(f cli.Flag) bool { return f.Names()[0] == "help" })
		m.raw(".SS " + quoteArg("pisess "+c.Name+usageTail(c, flags)))
		m.text(c.Usage + ".")
		if c.Description != "" {
			m.block(c.Description)
		}
		if len(flags) > 0 {
			m.para("Options:")
			m.raw(".RS")
			m.flags(flags)
			m.raw(".RE")
		}
		if lines := commandExitLines(c); len(lines) > 0 {
			m.para("Exit status:")
			m.raw(".RS")
			for _, l := range lines {
				code, meaning, _ := strings.Cut(l, " ")
				if _, err := strconv.Atoi(code); err != nil {
					m.para(l) // a remark, not a status
					continue
				}
				m.item(`\fB`+esc(code)+`\fR`, strings.TrimSpace(meaning))
			}
			m.raw(".RE")
		}
	}

	for _, sec := range manSections {
		m.section(sec.name)
		m.block(sec.text)
		for _, it := range sec.items {
			m.item(`\fB`+esc(it.tag)+`\fR`, it.text)
		}
	}

	m.section("EXIT STATUS")
	m.text("One value per run, never a bitwise combination of several: the most urgent wins.")
	for _, e := range exitStatuses {
		m.item(fmt.Sprintf(`\fB%d\fR`, e.code), e.meaning)
	}
	m.block(exitNotes)

	m.section("ENVIRONMENT")
	for _, e := range envFlagList(app) {
		m.item(`\fB`+esc(e.env)+`\fR`, "the default of "+e.flag+" (the command line wins).")
	}
	for _, e := range environment {
		m.item(`\fB`+esc(e.name)+`\fR`, e.meaning)
	}

	m.section("FILES")
	for _, f := range files {
		m.item(`\fI`+esc(f.path)+`\fR`, f.meaning)
	}

	m.section("SEE ALSO")
	m.text("pisess COMMAND --help; pisess completion bash|zsh|fish; the README of pisess; its " +
		"docs/json.md, installed in the documentation directory (e.g. /usr/local/share/doc/pisess/json.md) " +
		"beside the JSON Schemas it describes (the machine interface: pisess.report.v1 and pisess.progress.v1).")
	return m.String()
}

// usageTail is " [options] ARGS" for a command's synopsis.
func usageTail(c *cli.Command, flags []cli.Flag) string {
	s := ""
	if len(flags) > 0 {
		s += " [options]"
	}
	if c.ArgsUsage != "" {
		s += " " + c.ArgsUsage
	}
	return s
}

// commandExitLines are the lines of a command's EXIT STATUS section, as
// command() appended it to the command's help template.
func commandExitLines(c *cli.Command) []string {
	_, section, ok := strings.Cut(c.CustomHelpTemplate, "EXIT STATUS:\n")
	if !ok {
		return nil
	}
	var out []string
	for _, l := range strings.Split(section, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// manWriter accumulates roff.
type manWriter struct{ strings.Builder }

func (m *manWriter) raw(s string) { m.WriteString(s + "\n") }

func (m *manWriter) section(name string) { m.raw(".SH " + quoteArg(name)) }

// text writes filled text.
func (m *manWriter) text(s string) { m.raw(esc(s)) }

func (m *manWriter) para(s string) {
	m.raw(".PP")
	m.text(s)
}

// item writes a tagged paragraph: tag (roff already) and its text.
func (m *manWriter) item(tag, text string) {
	m.raw(".TP")
	m.raw(tag)
	m.text(text)
}

// block writes a description: paragraphs at blank lines; a paragraph with
// indented lines (examples, the forms of a command) keeps its lines.
func (m *manWriter) block(s string) {
	for _, p := range strings.Split(strings.TrimSpace(s), "\n\n") {
		lines := strings.Split(p, "\n")
		indented := false
		for _, l := range lines {
			indented = indented || strings.HasPrefix(l, " ")
		}
		m.raw(".PP")
		if !indented {
			m.text(p)
			continue
		}
		m.raw(".nf")
		for _, l := range lines {
			m.text(l)
		}
		m.raw(".fi")
	}
}

// flags writes one tagged paragraph per flag: its names and value, what
// it does, the words it takes, its default and its variable.
func (m *manWriter) flags(fs []cli.Flag) {
	for _, f := range fs {
		df, ok := f.(cli.DocGenerationFlag)
		if !ok {
			continue
		}
		placeholder, usage := unquoteUsage(df.GetUsage())
		var names []string
		for _, n := range f.Names() {
			dash := "--"
			if len(n) == 1 {
				dash = "-"
			}
			names = append(names, `\fB`+esc(dash+n)+`\fR`)
		}
		tag := strings.Join(names, ", ")
		if df.TakesValue() {
			if placeholder == "" {
				placeholder = "VALUE"
			}
			tag += ` \fI` + esc(placeholder) + `\fR`
		}
		text := usage
		def := df.GetDefaultText()
		if def == "" && df.TakesValue() {
			def = df.GetValue()
		}
		if df.TakesValue() && def != "" && def != `""` && def != "0" {
			text += " (default: " + strings.Trim(def, `"`) + ")"
		}
		if env := envFlags[f.Names()[0]]; env != "" {
			text += " [$" + env + "]"
		}
		m.item(tag, text)
	}
}

// esc escapes text for roff: backslashes, hyphens (so that --dry-run is
// typed as it reads), and a leading dot or quote, which would make the
// line a request.
func esc(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	var b strings.Builder
	for i, l := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		l = strings.TrimLeft(l, " ")
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			b.WriteString(`\&`)
		}
		for _, r := range l {
			if r < 0x80 {
				b.WriteRune(r)
			} else {
				// Plain ASCII input: groff without preconv reads it too.
				fmt.Fprintf(&b, `\[u%04X]`, r)
			}
		}
	}
	return b.String()
}

// quoteArg quotes a macro argument.
func quoteArg(s string) string {
	return `"` + strings.ReplaceAll(esc(s), `"`, `\(dq`) + `"`
}

// unquoteUsage splits a flag's usage into its placeholder, the first word
// in backquotes (urfave/cli's convention: "append logs to `FILE`"), and
// the usage without the backquotes.
func unquoteUsage(usage string) (placeholder, text string) {
	before, rest, ok := strings.Cut(usage, "`")
	if !ok {
		return "", usage
	}
	name, after, ok := strings.Cut(rest, "`")
	if !ok {
		return "", usage
	}
	return name, before + name + after
}
