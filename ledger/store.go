package ledger

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"pisess/writers/durable"
	"pisess/writers/wire"
)

// StoreLedgerPath returns <store>/migrations/ledger.jsonl.
func StoreLedgerPath(storeDir string) string {
	return filepath.Join(storeDir, filepath.FromSlash(wire.FilesMigrationLedgerPath))
}

// ErrTorn is matched by a ledger whose last line has no newline: a write
// that was cut off.
var ErrTorn = errors.New("torn last line")

// LedgerError is a store ledger that cannot be trusted: a line that does not
// parse as a migration event, or a torn last line (Err matches ErrTorn).
// The reference refuses to append to such a ledger, and so does pisess.
type LedgerError struct {
	Path string
	Line int64 // 1-based
	Err  error
}

func (e *LedgerError) Error() string {
	return fmt.Sprintf("migration ledger %s:%d: %v", e.Path, e.Line, e.Err)
}

func (e *LedgerError) Unwrap() error { return e.Err }

// ReadStoreEvents reads a store's migration ledger as the reference does:
// every line LF-terminated and a valid migration event; lines that Rust's
// trim() empties are skipped. A missing ledger (or migrations/ directory)
// has no events. A damaged one is a *LedgerError.
func ReadStoreEvents(storeDir string) ([]wire.MigrationEvent, error) {
	var out []wire.MigrationEvent
	err := scanStoreLedger(durable.OS, StoreLedgerPath(storeDir), func(ev wire.MigrationEvent) {
		out = append(out, ev)
	})
	return out, err
}

// AppendStoreEvent appends ev to the store's migrations/ledger.jsonl with
// durable.OS; see AppendStoreEventWith.
func AppendStoreEvent(storeDir string, ev wire.MigrationEvent) error {
	return AppendStoreEventWith(durable.OS, storeDir, ev)
}

// AppendStoreEventWith appends ev to the store's ledger the way the
// reference does (FORMAT.md §7): the event is checked against the contract,
// the existing ledger is read whole and must be valid with its last line
// terminated (an append onto a torn or corrupt ledger would bury the
// damage), then the line is appended and fsynced (the directory too, when
// the file is new). migrations/ is created 0700 when missing.
//
// The caller holds the store's store.mutation.lock when the store is
// installed; a staging store is private to its run.
func AppendStoreEventWith(ops durable.Ops, storeDir string, ev wire.MigrationEvent) error {
	return AppendStoreEventsWith(ops, storeDir, ev)
}

// AppendStoreEventsWith is AppendStoreEventWith for several events in
// order, with one check of the existing ledger: all are checked against
// the contract before the first is written.
func AppendStoreEventsWith(ops durable.Ops, storeDir string, evs ...wire.MigrationEvent) error {
	lines, err := eventLines(evs)
	if err != nil {
		return fmt.Errorf("append migration event: %w", err)
	}
	path := StoreLedgerPath(storeDir)
	if err := scanStoreLedger(ops, path, func(wire.MigrationEvent) {}); err != nil {
		return fmt.Errorf("append migration event: %w", err)
	}
	if err := ops.MkdirPrivate(filepath.Dir(path)); err != nil {
		return fmt.Errorf("append migration event: %w", err)
	}
	if len(lines) == 0 {
		return nil
	}
	if err := ops.AppendLines(path, lines); err != nil {
		return fmt.Errorf("append migration event: %w", err)
	}
	return nil
}

// ReplaceStoreEventsWith writes evs as the store's whole ledger, in place
// (durable.Ops.WriteFileInPlace; synced unless ops defer syncs), as the
// reference writes to a ledger: a store continued in place holds the
// events of its latest migration only, as a rebuilt store does. Not atomic:
// only for a sidecar marked dirty, which pi does not read until it is
// clean again.
func ReplaceStoreEventsWith(ops durable.Ops, storeDir string, evs ...wire.MigrationEvent) error {
	lines, err := eventLines(evs)
	if err == nil {
		err = ops.WriteFileInPlace(StoreLedgerPath(storeDir), lines, 0o600)
	}
	if err != nil {
		return fmt.Errorf("replace migration events: %w", err)
	}
	return nil
}

// eventLines checks every event against the contract and returns their
// lines, in order.
func eventLines(evs []wire.MigrationEvent) ([]byte, error) {
	var lines []byte
	for _, ev := range evs {
		if err := wire.CheckMigrationEvent(ev); err != nil {
			return nil, err
		}
		lines = wire.AppendMigrationEvent(lines, ev)
	}
	return lines, nil
}

// scanStoreLedger calls fn for each event of the ledger at path.
func scanStoreLedger(ops durable.Ops, path string, fn func(wire.MigrationEvent)) error {
	f, err := openRegular(ops, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var lineNo int64
	for {
		line, err := readLine(r, wire.MaxFrameBytes)
		if len(line) == 0 && err == io.EOF {
			return nil
		}
		lineNo++
		if err != nil && err != io.EOF {
			return &LedgerError{Path: path, Line: lineNo, Err: err}
		}
		if line[len(line)-1] != '\n' {
			return &LedgerError{Path: path, Line: lineNo, Err: ErrTorn}
		}
		if !utf8.Valid(line) {
			return &LedgerError{Path: path, Line: lineNo, Err: errors.New("not UTF-8")}
		}
		if strings.TrimSpace(string(line)) == "" {
			continue
		}
		ev, perr := wire.ParseMigrationEvent(trimCR(line))
		if perr != nil {
			return &LedgerError{Path: path, Line: lineNo, Err: perr}
		}
		fn(ev)
	}
}

// errLineTooLong is a line over the read limit.
var errLineTooLong = errors.New("line exceeds the 100 MiB read limit")

// readLine returns the next line with its newline (without one only at the
// end of the file), refusing one longer than limit; on errLineTooLong the
// rest of that line has been consumed, so reading can go on.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			if err == bufio.ErrBufferFull {
				for err == bufio.ErrBufferFull {
					_, err = r.ReadSlice('\n')
				}
			}
			if err != nil && err != io.EOF {
				return nil, err
			}
			return []byte{'\n'}, errLineTooLong
		}
		line = append(line, chunk...)
		switch err {
		case nil:
			return line, nil
		case bufio.ErrBufferFull:
			continue
		default:
			return line, err
		}
	}
}

// trimCR turns a "...\r\n" line into "...\n": the reference strips one CR
// before parsing.
func trimCR(line []byte) []byte {
	if n := len(line); n >= 2 && line[n-2] == '\r' {
		out := make([]byte, n-1)
		copy(out, line[:n-2])
		out[n-2] = '\n'
		return out
	}
	return line
}

// openRegular opens path for reading with no symlink in any component and
// requires a regular file (O_NONBLOCK, so a FIFO planted there cannot hang
// the reader).
func openRegular(ops durable.Ops, path string) (*os.File, error) {
	f, err := ops.OpenNoFollow(path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return f, nil
}
