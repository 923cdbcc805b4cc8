package commands

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"pisess/commands/engine"
)

// Log formats of --log-format.
const (
	LogConsole = "console" // zerolog's console writer: for people
	LogJSON    = "json"    // one JSON object per line: for machines
)

// EnvLogDir moves the default log (the one written without --log-file)
// to another directory.
const EnvLogDir = "PISESS_LOG_DIR"

// The default log: every run of a command that acts on trees appends its
// records to it, so that what pisess did to a tree — from cron, a timer or
// by hand — can be read afterwards without having asked for a log. Each
// user writes their own, where the XDG base directory specification puts
// state ($XDG_STATE_HOME, else ~/.local/state); root writes to /var/log,
// where an administrator looks (and where the systemd unit's LogsDirectory
// is). The default log is a convenience, never a reason to fail a run: a
// directory that cannot be made or a file that cannot be opened is one
// warning on stderr, and the run goes on (an explicit --log-file that
// cannot be opened fails the run: it was asked for).
const (
	rootLogDir     = "/var/log/pisess"
	defaultLogName = "pisess.log"
	// oldLogSuffix names the one previous generation of a default log
	// (not ".1", which logrotate would use if an administrator also
	// rotates the file).
	oldLogSuffix = ".old"
)

// defaultLogLimit bounds a default log: a run that finds it larger moves it
// to pisess.log.old (replacing the previous one) and starts a new file, so
// a user's log, which no logrotate watches, never holds more than twice
// this. A variable for the tests.
var defaultLogLimit int64 = 8 << 20

// logSetup is what the global flags say about logging.
type logSetup struct {
	format, level string
	levelSet      bool   // --log-level was given (or PISESS_LOG_LEVEL)
	quiet         bool   // -q
	file          string // --log-file (or PISESS_LOG_FILE)
	// defaultFile: the command acts on trees, so without --log-file it
	// logs to the default log as well as to stderr.
	defaultFile bool
}

// setupLogging builds the run's logger from the global flags (Before).
func (r *run) setupLogging(c *cli.Context) error {
	s := logSetup{format: c.String("log-format"), level: c.String("log-level"), levelSet: c.IsSet("log-level"),
		quiet: r.view.quiet, file: c.String("log-file")}
	if cmd := findCommand(c.App, c.Args().First()); cmd != nil {
		_, s.defaultFile = treeCommands[cmd.Name]
	}
	log, closer, err := newLogger(s, r.stderr)
	if err != nil {
		return err
	}
	r.log, r.logCloser = log, closer
	return nil
}

// newLogger builds the run's logger. With --log-file, logs go to that file
// only (appended to, created 0600; its level info unless --log-level says
// otherwise). Without it they go to stderr, warnings and errors only
// (errors only with -q: cron mails stderr), and, for a command that acts
// on trees, also to the default log from info up. stdout is never used:
// it belongs to the report. The returned closer closes the file.
func newLogger(s logSetup, stderr io.Writer) (zerolog.Logger, io.Closer, error) {
	lvl, err := zerolog.ParseLevel(s.level)
	if err != nil || s.level == "" {
		return zerolog.Nop(), nil, engine.Usagef("--log-level %q: want trace, debug, info, warn or error", s.level)
	}
	if s.format != LogJSON && s.format != LogConsole {
		return zerolog.Nop(), nil, engine.Usagef("--log-format %q: want console or json", s.format)
	}
	if s.file != "" {
		f, err := openLogFile(s.file)
		if err != nil {
			// The flag is well formed; the file system refuses it.
			return zerolog.Nop(), nil, fmt.Errorf("--log-file: %w", err)
		}
		return zerolog.New(formatted(s.format, f)).Level(lvl).With().Timestamp().Logger(), f, nil
	}
	stderrLvl := lvl
	if !s.levelSet {
		// On stderr, which a person reads (or cron mails), the run
		// records are noise: warnings and errors only by default; a log
		// file gets everything from info up.
		stderrLvl = zerolog.WarnLevel
		if s.quiet {
			stderrLvl = zerolog.ErrorLevel
		}
	}
	var f *os.File
	if s.defaultFile {
		f = openDefaultLog(stderr)
	}
	if f == nil {
		return zerolog.New(formatted(s.format, stderr)).Level(stderrLvl).With().Timestamp().Logger(), nil, nil
	}
	w := zerolog.MultiLevelWriter(
		&zerolog.FilteredLevelWriter{Writer: zerolog.LevelWriterAdapter{Writer: formatted(s.format, stderr)}, Level: stderrLvl},
		&zerolog.FilteredLevelWriter{Writer: zerolog.LevelWriterAdapter{Writer: formatted(s.format, f)}, Level: lvl})
	return zerolog.New(w).Level(min(lvl, stderrLvl)).With().Timestamp().Logger(), f, nil
}

// formatted is w in the log format: JSON as is, console through zerolog's
// console writer (colored only on a terminal).
func formatted(format string, w io.Writer) io.Writer {
	if format == LogConsole {
		return zerolog.ConsoleWriter{Out: w, NoColor: !isTerminal(w), TimeFormat: time.RFC3339}
	}
	return w
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// inheritedLog is the log descriptor a root parent opened for this child
// run as a tree's owner (owner.go), or nil.
func inheritedLog(name string) *os.File {
	if os.Getenv(envOwnerChild) == "" {
		return nil
	}
	if n, err := strconv.Atoi(os.Getenv(envLogFD)); err == nil && n > 2 {
		return os.NewFile(uintptr(n), name)
	}
	return nil
}

// openLogFile opens the log for appending; in a child run as a tree's
// owner it is the descriptor the root parent opened (owner.go). Each run
// opens it anew with O_APPEND, so a log rotated between runs — renamed and
// recreated (logrotate's create) or copied and truncated (copytruncate) —
// is written at its end: the new file, or the truncated one from its start.
func openLogFile(file string) (*os.File, error) {
	if f := inheritedLog(file); f != nil {
		return f, nil
	}
	return os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}

// openDefaultLog opens the default log, or warns once on stderr and
// returns nil. A child run as a tree's owner writes through the
// descriptor its root parent opened, and has none when the parent could
// not open it (the parent warned).
func openDefaultLog(stderr io.Writer) *os.File {
	if os.Getenv(envOwnerChild) != "" {
		return inheritedLog(defaultLogName)
	}
	f, err := createDefaultLog()
	if err != nil {
		fmt.Fprintf(stderr, "pisess: warning: default log: %v (the run goes on; --log-file names another)\n", err)
		return nil
	}
	return f
}

// createDefaultLog opens (creating them when missing) the default log
// directory, 0700 for a user (their state is theirs alone) and 0750 for
// root (the adm group may read /var/log), and the log in it; a log over
// defaultLogLimit is first moved to pisess.log.old.
func createDefaultLog() (*os.File, error) {
	dir, mode, err := defaultLogDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	path := filepath.Join(dir, defaultLogName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() <= defaultLogLimit {
		return f, nil
	}
	// Move the full log aside only if it is still the file at path: a
	// concurrent run may have done so already (its new file is then kept).
	if cur, err := os.Lstat(path); err == nil && os.SameFile(cur, fi) {
		if err := os.Rename(path, path+oldLogSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return f, nil // keep appending: a log too long beats no log
		}
	}
	_ = f.Close()
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}

// defaultLogDir is the default log's directory and the mode it is created
// with: $PISESS_LOG_DIR when set; root's /var/log/pisess; else
// $XDG_STATE_HOME/pisess (an absolute path, as the XDG specification
// requires), else ~/.local/state/pisess. Root never takes XDG_STATE_HOME
// or HOME from the environment: under `sudo -E` they name a user's
// directory, where a planted link would make root append to any file.
func defaultLogDir() (string, os.FileMode, error) {
	mode := os.FileMode(0o700)
	if os.Geteuid() == 0 {
		mode = 0o750
	}
	if d := os.Getenv(EnvLogDir); d != "" {
		abs, err := filepath.Abs(d)
		return abs, mode, err
	}
	if os.Geteuid() == 0 {
		return rootLogDir, mode, nil
	}
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "pisess"), mode, nil
	}
	home := os.Getenv("HOME")
	if !filepath.IsAbs(home) {
		u, err := user.Current()
		if err != nil || !filepath.IsAbs(u.HomeDir) {
			return "", 0, fmt.Errorf("no home directory to keep it in (set XDG_STATE_HOME or %s)", EnvLogDir)
		}
		home = u.HomeDir
	}
	return filepath.Join(home, ".local", "state", "pisess"), mode, nil
}
