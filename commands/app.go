// Package commands is pisess's command line: a urfave/cli/v2 app whose
// commands turn flags into options, make one call (migrate and upgrade
// into engine, the others into the package that owns their work: each
// command's file holds its options, report and run function), and render
// the typed report as text or as one JSON object, both on stdout (logs,
// progress and errors go to stderr). Main returns the exit status; nothing
// here calls os.Exit.
package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
)

// commandList is every pisess command, in the order help lists them. A
// command is added by writing its constructor in its own file and adding
// one line here.
var commandList = []func(*run) *cli.Command{
	migrateCommand,
	rollbackCommand,
	upgradeCommand,
	fsckCommand,
	statusCommand,
	runsCommand,
	pruneCommand,
	verifyCommand,
	inspectCommand,
	buildCommand,
	versionCommand,
	completionCommand,
	manCommand,
}

// Environment variables pisess reads.
const (
	EnvSessionsDir = "PI_SESSIONS_DIR"
	EnvAgentDir    = "PI_CODING_AGENT_DIR"
)

const appDescription = `pisess migrates the session stores of the pi coding agent to Session Store V2
sidecars (<stem>.v2/ beside each session file), byte for byte as the reference
implementation writes them, and verifies, repairs and rolls them back.

Output: with --json a command prints exactly one JSON object on stdout, a
failure included ({"error":{"class":...,"message":...}}); text reports go to
stdout too; logs, errors and the progress bar (drawn only when stderr is a
terminal) go to stderr. -q prints only what needs action (nothing at all
when nothing does), -v lists every item; both work before or after the
command, as every flag does.

Logs: without --log-file, the commands that act on trees also append their
records to a default log: ~/.local/state/pisess/pisess.log for a user
($XDG_STATE_HOME/pisess/ when set), /var/log/pisess/pisess.log for root.

As root, a tree another user owns is worked on by a child process running as
its owner, never by root; --all-users runs over every account's default tree.
The session files are never changed (but by pisess upgrade, when asked), no
symlink is followed, and outside the trees pisess writes only its own logs,
metrics and temporary files.

pisess man prints the whole manual: each command in full, the conventions,
logs and metrics, several users' trees and the security model.`

// environment is every environment variable pisess reads that no flag
// stands for (those are envFlags), with what it does: --help's and the man
// page's ENVIRONMENT sections are made from it, and a test holds the
// README's table to it.
var environment = []struct{ name, meaning string }{
	{EnvClock, "an RFC 3339 time such as 2026-01-01T00:00:00.000Z that fixes every time pisess writes " +
		"(frame timestamps, manifest createdAt/updatedAt, ledger events), so that a store can be reproduced " +
		"byte for byte; an invalid value is a usage error (16). Unset: the wall clock."},
	{EnvSessionsDir, "the session tree, when a command is given none."},
	{EnvAgentDir, "the pi agent directory; the tree is its sessions/ when " + EnvSessionsDir +
		" is unset (default ~/.pi/agent/sessions)."},
	{"PISESS_LOG_DIR", "the directory of the default log (pisess.log), which the commands that act on trees " +
		"append to when no --log-file is given; default /var/log/pisess for root, else $XDG_STATE_HOME/pisess, " +
		"else ~/.local/state/pisess."},
	{"GOMEMLIMIT", "the Go collector's soft memory limit; unset, pisess sets one that follows the live heap."},
	{"GOGC", "the Go collector's target; unset, pisess collects at 5x the live heap (400)."},
	{"GOMAXPROCS", "the Go runtime's number of threads running Go code at once; set, pisess keeps it " +
		"(unset: the CPUs the process may use, its cgroup's quota included, and a migration of small sessions " +
		"uses one more, to overlap system calls); the default --jobs follows it."},
}

// exitStatuses are pisess's exit statuses, the most urgent first: the EXIT
// STATUS sections of --help and the man page are made from them.
var exitStatuses = []struct {
	code    int
	meaning string
}{
	{ExitClean, "clean: nothing wrong, or nothing to do"},
	{ExitRepaired, "problems were found and all of them were repaired"},
	{ExitProblems, "problems were found and some are left"},
	{ExitOperational, "operational error: pisess could not run (I/O, unreadable or refused input, interrupted)"},
	{ExitUsage, "usage error: wrong command, flags, arguments or environment"},
	{ExitLocked, "the session tree is locked by another pisess run"},
}

// envHelp is --help's ENVIRONMENT section: the variables flags read, then
// the others.
func envHelp(app *cli.App) string {
	var b strings.Builder
	b.WriteString("ENVIRONMENT:\n")
	for _, e := range envFlagList(app) {
		fmt.Fprintf(&b, "   %-20s the default of %s\n", e.env, e.flag)
	}
	for _, e := range environment {
		fmt.Fprintf(&b, "   %-20s %s\n", e.name, wrap(e.meaning, 55, "\n"+strings.Repeat(" ", 24)))
	}
	return b.String()
}

// globalExitHelp is --help's EXIT STATUS section.
func globalExitHelp() string {
	var b strings.Builder
	b.WriteString("EXIT STATUS (one value, never combined):\n")
	for _, e := range exitStatuses {
		fmt.Fprintf(&b, "   %-3d %s\n", e.code, e.meaning)
	}
	return b.String()
}

// wrap breaks s into lines of at most width bytes, joined by sep.
func wrap(s string, width int, sep string) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), sep)
}

// run is the state of one Main call: where output goes, the logger, and
// what the command that ran produced. Main renders it after the app returns,
// so that --json output is exactly one object whatever happened.
type run struct {
	stdout, stderr io.Writer
	log            zerolog.Logger
	logCloser      io.Closer

	// set by the command's action
	json   bool          // --json was given
	report engine.Report // nil until the command's run returned
	text   func(w io.Writer)
	value  any // what --json prints on success

	// set by "pisess help NAME" for an unknown NAME, which urfave/cli does
	// not treat as an error
	usageErr error

	args []string // the command line, for a child run as a tree's owner
	// argv is the command line as parsed (normalizeArgs): where a flag's
	// value came from is read from it.
	argv []string
	// view is how much a text report shows (-q, -v).
	view view

	// The run, for its log records and a cancel message (runlog.go).
	command string
	cid     string
	started time.Time

	// metrics is where the run's metrics go (metrics.go); nil: nowhere.
	metrics *runMetrics

	// childExit is the exit status of the child that ran the command as
	// the tree's owner (owner.go), which printed everything itself; -1
	// when the command ran here.
	childExit int
}

// Main runs pisess with args (args[0] is the program name) and returns the
// exit status. It never calls os.Exit, so deferred cleanup runs and tests
// can call it in-process.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	r := &run{stdout: stdout, stderr: stderr, log: zerolog.Nop(), json: wantsJSON(args), args: args, childExit: -1}
	app := r.app()
	if len(args) > 1 && args[1] == completeCommand {
		return runComplete(app, args[2:], stdout)
	}
	r.argv = normalizeArgs(app, args)
	err := app.RunContext(ctx, r.argv)
	closeLog := func() {
		if r.logCloser != nil {
			if cerr := r.logCloser.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("close log file: %w", cerr)
			}
		}
	}
	if err == nil && r.childExit >= 0 {
		code := r.finishMetrics(r.childExit)
		closeLog()
		return code
	}
	if err == nil {
		err = r.usageErr
	}
	if err != nil {
		err = r.canceled(err)
	}
	code := r.finishMetrics(ExitCode(r.report, err))
	r.endRun(code, err)
	closeLog()
	switch {
	case err != nil:
		var ce *canceledError
		if errors.As(err, &ce) && r.text != nil && !r.json && !r.view.quiet {
			// What the run did before it stopped; with -q the one line
			// below (the run and its undo) is all (issue 34 §3: cron
			// mailed the report of every session).
			r.text(r.stdout)
		}
		r.renderError(err)
	case r.json && r.value != nil:
		if werr := writeJSON(r.stdout, r.newEnvelope(code)); werr != nil {
			return ExitOperational
		}
	case r.text != nil && !(r.view.quiet && code == ExitClean):
		// Reports are the command's output: stdout, so that
		// `pisess status | grep` works; logs and errors go to stderr.
		r.text(r.stdout)
	}
	return code
}

func (r *run) app() *cli.App {
	app := &cli.App{
		Name:        "pisess",
		Usage:       "migrate, verify, repair and roll back pi session stores (Session Store V2)",
		UsageText:   "pisess [global options] command [command options] [arguments...]",
		Description: appDescription,
		Version:     Version(),
		Suggest:     true,
		// A path may hold a comma: repeat a flag to give several.
		DisableSliceFlagSeparator: true,
		Writer:                    r.stdout,
		ErrWriter:                 r.stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-format", Value: LogConsole, Usage: "log format: " + orList(flagValues["log-format"]) + " (console for people, json one object per line)"},
			&cli.StringFlag{Name: "log-file", Usage: "append logs to `FILE` instead of stderr and the default log", TakesFile: true},
			&cli.StringFlag{Name: "metrics-file", Usage: "write the run's metrics to `FILE` in the Prometheus text format (node_exporter's textfile collector), replaced at the end of every run", TakesFile: true},
			&cli.StringFlag{Name: "log-level", Value: "info", DefaultText: "warn on stderr, info in a log file",
				Usage: "least severe level logged: " + orList(flagValues["log-level"])},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print only what needs action, nothing when nothing does (for cron); logs on stderr only at error level"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "list every item of a report, not only problems and notices"},
		},

		// urfave/cli calls os.Exit itself for an ExitCoder when this is nil.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   onUsageError,
		CommandNotFound: func(_ *cli.Context, name string) {
			// Only "pisess help NAME" gets here.
			r.usageErr = engine.Usagef("no such command %q (see pisess --help)", name)
		},
		Before: r.before,
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				name := c.Args().First()
				if s := suggest(c.App, name); s != "" {
					return engine.Usagef("unknown command %q: did you mean %q? (see pisess --help)", name, s)
				}
				return engine.Usagef("unknown command %q (see pisess --help)", name)
			}
			return engine.Usagef("no command given (see pisess --help)")
		},
	}
	for _, mk := range commandList {
		c := mk(r)
		action := c.Action
		_, onTrees := treeCommands[c.Name]
		c.Action = func(ctx *cli.Context) error {
			r.command, r.started = ctx.Command.Name, time.Now()
			if err := checkFlags(ctx, r.argv, ctx.Command.Flags); err != nil {
				return err
			}
			if err := r.checkBounds(ctx); err != nil {
				return err
			}
			if !onTrees {
				return action(ctx)
			}
			if ran, err := r.asTreeOwner(ctx); ran {
				return err
			}
			if cid := r.startRun(ctx); cid != "" && runIDCommands[ctx.Command.Name] {
				if err := ctx.Set("correlation-id", cid); err != nil {
					return err
				}
			}
			return action(ctx)
		}
		app.Commands = append(app.Commands, c)
	}
	applyConventions(app)
	addAllUsersFlags(app)
	applyBounds(app)
	app.CustomAppHelpTemplate = cli.AppHelpTemplate + "\n" + envHelp(app) + "\n" + globalExitHelp()
	return app
}

// before sets up logging and metrics from the global flags.
func (r *run) before(c *cli.Context) error {
	// An invalid PISESS_CLOCK is a usage error for every command, not
	// only for those that write times.
	if _, err := ClockFromEnv(); err != nil {
		return err
	}
	if err := checkFlags(c, r.argv, c.App.Flags); err != nil {
		return err
	}
	r.view = view{quiet: c.Bool("quiet"), verbose: c.Bool("verbose") && !c.Bool("quiet")}
	if err := r.setupLogging(c); err != nil {
		var usage *engine.UsageError
		if env := flagEnv(r.argv, logFileFlag(c)); env != "" && !errors.As(err, &usage) && errors.Unwrap(err) != nil {
			// The file came from the environment: say so.
			err = fmt.Errorf("%s: %w", env, errors.Unwrap(err))
		}
		return err
	}
	return r.setupMetrics(c)
}

// logFileFlag is the global --log-file flag.
func logFileFlag(c *cli.Context) cli.Flag {
	for _, f := range c.App.Flags {
		if f.Names()[0] == "log-file" {
			return f
		}
	}
	return &cli.StringFlag{Name: "log-file"}
}

// onUsageError turns urfave/cli's flag parsing errors into usage errors:
// an unknown flag gets a did-you-mean among the flags the command takes,
// and a value urfave/cli cannot parse names its flag and what it wants.
func onUsageError(c *cli.Context, err error, _ bool) error {
	msg := err.Error()
	const undefined = "flag provided but not defined: "
	if name, ok := strings.CutPrefix(msg, undefined); ok {
		if s := suggestFlag(c, strings.TrimLeft(name, "-")); s != "" {
			return engine.Usagef("%s: did you mean %s?", msg, s)
		}
	}
	// flag's message: invalid value "x" for flag -lock-wait: parse error
	if strings.HasPrefix(msg, "invalid value ") && strings.HasSuffix(msg, ": parse error") {
		for _, f := range commandFlags(c) {
			if _, isDuration := f.(*cli.DurationFlag); !isDuration {
				continue
			}
			for _, n := range f.Names() {
				if strings.Contains(msg, " for flag -"+n+":") {
					return engine.Usagef("%s: want a duration such as 5s, 2m or 1h30m", strings.TrimSuffix(msg, ": parse error"))
				}
			}
		}
	}
	return &engine.UsageError{Err: err}
}

// command finishes a command's definition: flag errors become usage errors,
// and its help ends with its exit statuses.
func command(c *cli.Command, exitStatus string) *cli.Command {
	c.OnUsageError = onUsageError
	c.CustomHelpTemplate = cli.CommandHelpTemplate + "\n" + exitStatus
	return c
}

// wantsJSON reports whether --json appears among the arguments before "--".
// Main needs to know before the flags are parsed: a flag error of a --json
// run is reported as a JSON object too.
func wantsJSON(args []string) bool {
	for _, a := range args[min(1, len(args)):] {
		switch a {
		case "--":
			return false
		case "--json", "-json", "--json=true", "-json=true":
			return true
		}
	}
	return false
}

// args checks a command's positional arguments: exactly the names given.
func args(c *cli.Context, names ...string) ([]string, error) {
	got := c.Args().Slice()
	if len(got) != len(names) {
		return nil, engine.Usagef("%s wants %d argument(s), %s; got %d (see pisess %s --help)",
			c.Command.Name, len(names), strings.Join(names, " "), len(got), c.Command.Name)
	}
	return got, nil
}

// renderError prints err once: as {"error":{...}} on stdout for --json,
// else as one line on stderr.
func (r *run) renderError(err error) {
	if r.json {
		doc := newErrorDoc(errorClass(err), err.Error())
		var ce *canceledError
		if errors.As(err, &ce) {
			// The interrupted run: its id (for rollback) and what it did.
			doc.Error.CorrelationID, doc.Report = r.cid, r.value
		}
		_ = writeJSON(r.stdout, doc)
		return
	}
	msg := err.Error()
	var usage *engine.UsageError
	if errors.As(err, &usage) && !strings.Contains(msg, "--help") {
		msg += " (see pisess --help)"
	}
	fmt.Fprintf(r.stderr, "pisess: %s\n", msg)
}

// jsonFlag is the --json flag every command takes.
func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout (a failure included) instead of text"}
}
