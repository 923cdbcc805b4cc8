package commands

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"

	"pisess/commands/engine"
)

// Log formats of --log-format.
const (
	LogConsole = "console" // zerolog's console writer: for people
	LogJSON    = "json"    // one JSON object per line: for machines
)

// newLogger builds the run's logger from the global flags. Logs go to
// stderr unless --log-file names a file (appended to, created 0600); stdout
// is never used, it belongs to --json. The returned closer closes the file.
func newLogger(format, level, file string, stderr io.Writer) (zerolog.Logger, io.Closer, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Nop(), nil, engine.Usagef("--log-level %q: want trace, debug, info, warn or error", level)
	}
	w, closer := stderr, io.Closer(nil)
	if file != "" {
		f, err := openLogFile(file)
		if err != nil {
			// The flag is well formed; the file system refuses it.
			return zerolog.Nop(), nil, fmt.Errorf("--log-file: %w", err)
		}
		w, closer = f, f
	}
	switch format {
	case LogJSON:
	case LogConsole:
		w = zerolog.ConsoleWriter{Out: w, NoColor: !isTerminal(w), TimeFormat: time.RFC3339}
	default:
		if closer != nil {
			_ = closer.Close()
		}
		return zerolog.Nop(), nil, engine.Usagef("--log-format %q: want console or json", format)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), closer, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// openLogFile opens the log for appending; in a child run as a tree's
// owner it is the descriptor the root parent opened (owner.go).
func openLogFile(file string) (*os.File, error) {
	if fd := os.Getenv(envLogFD); fd != "" && os.Getenv(envOwnerChild) != "" {
		if n, err := strconv.Atoi(fd); err == nil && n > 2 {
			return os.NewFile(uintptr(n), file), nil
		}
	}
	return os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}
