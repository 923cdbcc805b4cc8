// Package commands is pisess's command line: a urfave/cli/v2 app whose
// commands turn flags into options, make one engine call, and render the
// typed report as text (stderr) or as one JSON object (stdout). Main returns
// the exit status; nothing here calls os.Exit.
package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

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
failure included ({"error":{"class":...,"message":...}}); text reports, logs
and the progress bar (drawn only when stderr is a terminal) go to stderr.`

const envHelp = `ENVIRONMENT:
   PISESS_CLOCK         an RFC 3339 time such as 2026-01-01T00:00:00.000Z that
                        fixes every time pisess writes (frame timestamps,
                        manifest createdAt/updatedAt, ledger events), so that a
                        store can be reproduced byte for byte; an invalid value
                        is a usage error (16). Unset: the wall clock.
   PI_SESSIONS_DIR      the session tree, when no tree is given.
   PI_CODING_AGENT_DIR  the pi agent directory; the tree is its sessions/ when
                        PI_SESSIONS_DIR is unset (default ~/.pi/agent/sessions).
`

const globalExitHelp = `EXIT STATUS (one value, never combined):
   0   clean: nothing wrong, or nothing to do
   1   problems were found and all of them were repaired
   4   problems were found and some are left
   8   operational error: pisess could not run (I/O, unreadable or refused input, interrupted)
   16  usage error: wrong command, flags, arguments or environment
   32  the session tree is locked by another pisess run
`

// run is the state of one Main call: where output goes, the logger, and
// what the command that ran produced. Main renders it after the app returns,
// so that --json output is exactly one object whatever happened.
type run struct {
	stdout, stderr io.Writer
	log            zerolog.Logger
	logCloser      io.Closer

	// set by the command's action
	json   bool          // --json was given
	report engine.Report // nil until the engine returned
	text   func(w io.Writer)
	value  any // what --json prints on success

	// set by "pisess help NAME" for an unknown NAME, which urfave/cli does
	// not treat as an error
	usageErr error
}

// Main runs pisess with args (args[0] is the program name) and returns the
// exit status. It never calls os.Exit, so deferred cleanup runs and tests
// can call it in-process.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	r := &run{stdout: stdout, stderr: stderr, log: zerolog.Nop(), json: wantsJSON(args)}
	err := r.app().RunContext(ctx, args)
	if r.logCloser != nil {
		if cerr := r.logCloser.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close log file: %w", cerr)
		}
	}
	if err == nil {
		err = r.usageErr
	}
	code := ExitCode(r.report, err)
	switch {
	case err != nil:
		r.renderError(err)
	case r.json && r.value != nil:
		if werr := writeJSON(r.stdout, r.value); werr != nil {
			return ExitOperational
		}
	case r.text != nil:
		r.text(r.stderr)
	}
	return code
}

func (r *run) app() *cli.App {
	app := &cli.App{
		Name:        "pisess",
		Usage:       "migrate, verify, repair and roll back pi session stores (Session Store V2)",
		UsageText:   "pisess [global options] command [command options] [arguments...]",
		Description: appDescription,
		HideVersion: true,
		Writer:      r.stdout,
		ErrWriter:   r.stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-format", Value: LogConsole, Usage: "log format: console (for people) or json (one object per line)"},
			&cli.StringFlag{Name: "log-file", Usage: "append logs to `FILE` instead of stderr"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "least severe level logged: trace, debug, info, warn or error"},
		},
		CustomAppHelpTemplate: cli.AppHelpTemplate + "\n" + envHelp + "\n" + globalExitHelp,
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
				return engine.Usagef("unknown command %q (see pisess --help)", c.Args().First())
			}
			return engine.Usagef("no command given (see pisess --help)")
		},
	}
	for _, mk := range commandList {
		app.Commands = append(app.Commands, mk(r))
	}
	return app
}

// before sets up logging from the global flags.
func (r *run) before(c *cli.Context) error {
	log, closer, err := newLogger(c.String("log-format"), c.String("log-level"), c.String("log-file"), r.stderr)
	if err != nil {
		return err
	}
	r.log, r.logCloser = log, closer
	return nil
}

// onUsageError turns urfave/cli's flag parsing errors into usage errors.
func onUsageError(_ *cli.Context, err error, _ bool) error {
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
		_ = writeJSON(r.stdout, errorDoc{Error: errorBody{Class: errorClass(err), Message: err.Error()}})
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
	return &cli.BoolFlag{Name: "json", Usage: "print one JSON object on stdout (a failure included) instead of text on stderr"}
}
