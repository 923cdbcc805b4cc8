package verify

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// FreshnessResult is the reference's verdict on a sidecar's source-state.json
// (FORMAT.md §8).
type FreshnessResult struct {
	// Fresh: the sidecar may be used without verifying it against the
	// source.
	Fresh bool
	// Reason says why, in a few words.
	Reason string
	// NeedsFullVerify: there is no source-state.json, or it is clean
	// without a fingerprint: pi would take the session lock, verify the
	// whole sidecar against the source (§9) and write the state itself.
	// Fresh is false.
	NeedsFullVerify bool
	// Invalid: source-state.json exists but cannot be trusted (a symlink,
	// over 4096 bytes, bad JSON, wrong schema, a bad sha256). pi's resume
	// treats it as stale, its status as corrupt.
	Invalid bool
	// Rehashed: the fast identity check could not decide and the source
	// was hashed again.
	Rehashed bool
	// State is the parsed document, when it parsed.
	State *wire.SourceState
}

// Freshness decides, exactly as the reference does, whether the sidecar at
// storeDir is fresh for the session file sourcePath:
//
//   - source-state.json missing: NeedsFullVerify;
//   - unreadable or invalid (a symlink, not a regular file, over 4096
//     bytes, bad JSON, wrong schema, a sha256 that is not 64 hex digits):
//     stale and Invalid;
//   - "dirty": stale;
//   - "clean" without a fingerprint: NeedsFullVerify;
//   - "clean" with one: fresh when byteLength equals the source's size and
//     fileIdentity is present and equal in all four members; otherwise the
//     source is hashed again and it is fresh exactly when byteLength and
//     sha256 match (a length that differs is stale without hashing: the
//     same verdict). A missing source is stale; a source that changes
//     while it is hashed is stale too (pisess's choice: the reference's
//     read-only status calls that an error; a source being written without
//     the dirty mark is what it means, and that is what stale says).
//
// A SQLite session is judged by pisess alone (pi never reads the sidecar of
// one, FORMAT.md §10): besides the database file's fingerprint, a
// write-ahead log (<file>-wal) written after the source state (walWritten)
// makes it stale, since the commits it holds are not in the file yet.
//
// It never writes and never locks. An error means the check could not be
// made (the source exists but cannot be opened or read).
func Freshness(sourcePath, storeDir string) (FreshnessResult, error) {
	fr, stateWritten, err := freshnessAt(sourcePath, storeDir)
	if err == nil && fr.Fresh {
		if reason, ok := walWritten(sourcePath, stateWritten); ok {
			fr.Fresh, fr.Reason = false, reason
		}
	}
	return fr, err
}

// walRacyWindow: a write-ahead log modified less than this before the
// sidecar's source state was written may hold commits that the build,
// which read the database before, did not see (the racily-clean rule of
// the fresh cache, for a coarse or lagging file clock too).
const walRacyWindow = 2 * time.Second

// walSuffix names a SQLite database's write-ahead log beside it.
const walSuffix = "-wal"

// walWritten reports whether the SQLite session at sourcePath has a
// write-ahead log with bytes in it modified after stateWritten (the
// sidecar's source-state.json, written after its build read the
// database), or less than walRacyWindow before, and says so. A writer that
// keeps its connection open with automatic checkpoints off leaves every
// commit there and the database file as it was (issue 34).
func walWritten(sourcePath string, stateWritten time.Time) (string, bool) {
	if filepath.Ext(sourcePath) != ".sqlite" || stateWritten.IsZero() {
		return "", false
	}
	wal := sourcePath + walSuffix
	fi, err := os.Lstat(wal)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return "", false
	}
	if fi.ModTime().Before(stateWritten.Add(-walRacyWindow)) {
		return "", false
	}
	return fmt.Sprintf("the database's write-ahead log %s was written at %s, after the sidecar was built: it holds commits the sidecar may lack",
		filepath.Base(wal), fi.ModTime().UTC().Format(time.RFC3339Nano)), true
}

// freshnessAt is Freshness but for the write-ahead log, and returns when
// source-state.json was written (zero when it was not read).
func freshnessAt(sourcePath, storeDir string) (FreshnessResult, time.Time, error) {
	st, stateWritten, problem, err := readSourceState(durable.OS, storeDir)
	fr, err := freshnessOf(sourcePath, st, problem, err)
	return fr, stateWritten, err
}

// freshnessOf is the reference's verdict from the source state st (or the
// problem or error met reading it).
func freshnessOf(sourcePath string, st *wire.SourceState, problem string, err error) (FreshnessResult, error) {
	switch {
	case err != nil:
		return FreshnessResult{}, err
	case problem != "":
		return FreshnessResult{Invalid: true, Reason: "source-state.json is invalid: " + problem}, nil
	case st == nil:
		return FreshnessResult{NeedsFullVerify: true, Reason: "no source-state.json"}, nil
	case st.State == wire.SourceDirty:
		return FreshnessResult{State: st, Reason: "source-state.json is dirty: pi has written the session since"}, nil
	case st.SourceFingerprint == nil:
		return FreshnessResult{State: st, NeedsFullVerify: true, Reason: "source-state.json is clean without a fingerprint"}, nil
	}
	fp := st.SourceFingerprint
	if fi, err := os.Lstat(sourcePath); err == nil && fi.Mode().IsRegular() && uint64(fi.Size()) != fp.ByteLength {
		// Stale by its length alone (below): no need to open it.
		return lengthDiffers(st, fi.Size()), nil
	}
	f, err := openSource(sourcePath)
	if errors.Is(err, fs.ErrNotExist) {
		return FreshnessResult{State: st, Reason: "the source is missing"}, nil
	}
	if err != nil {
		return FreshnessResult{}, fmt.Errorf("freshness: %w", err)
	}
	defer f.Close()
	now, err := statOf(f)
	if err != nil {
		return FreshnessResult{}, fmt.Errorf("freshness: %w", err)
	}
	if fp.ByteLength == uint64(now.size) && sameIdentity(fp.FileIdentity, now.id) {
		return FreshnessResult{Fresh: true, State: st, Reason: "the source's size and identity match the fingerprint"}, nil
	}
	if fp.ByteLength != uint64(now.size) {
		// The reference hashes here too, but no digest can make lengths
		// that differ match: the verdict is the same without reading the
		// source (the TypeScript pi's appends land here every run, §12).
		return lengthDiffers(st, now.size), nil
	}
	actual, err := fingerprintOpen(f, nil)
	if errors.Is(err, ErrSourceChanged) {
		return FreshnessResult{State: st, Rehashed: true, Reason: "the source changed while it was hashed"}, nil
	}
	if err != nil {
		return FreshnessResult{}, fmt.Errorf("freshness: %w", err)
	}
	if actual.ByteLength == fp.ByteLength && actual.SHA256 == fp.SHA256 {
		return FreshnessResult{Fresh: true, State: st, Rehashed: true, Reason: "the source's bytes match the fingerprint"}, nil
	}
	return FreshnessResult{State: st, Rehashed: true, Reason: "the source's bytes differ from the fingerprint"}, nil
}

// readSourceState reads <store>/source-state.json as the reference does:
// (nil, "", nil) when absent; problem set when it cannot be trusted; err
// only for an I/O error other than those. written is the file's
// modification time when it was read.
func readSourceState(ops durable.Ops, storeDir string) (st *wire.SourceState, written time.Time, problem string, err error) {
	path := store.SourceStatePath(storeDir)
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, written, "", nil
	case err != nil:
		return nil, written, err.Error(), nil
	case !fi.Mode().IsRegular():
		return nil, written, "not a regular file (a symlink or special file)", nil
	}
	f, err := ops.OpenNoFollow(path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, written, "cannot open: " + err.Error(), nil
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil || !ofi.Mode().IsRegular() || !os.SameFile(fi, ofi) {
		return nil, written, "changed while it was being opened", nil
	}
	b, err := durable.ReadLimited(f, ofi.Size(), wire.MaxSourceStateBytes)
	if err != nil {
		return nil, written, "", fmt.Errorf("read %s: %w", path, err)
	}
	s, err := wire.ParseSourceState(b)
	if err != nil {
		return nil, written, err.Error(), nil
	}
	return &s, ofi.ModTime(), "", nil
}

// lengthDiffers is the verdict on a source whose length is not the
// fingerprint's.
func lengthDiffers(st *wire.SourceState, size int64) FreshnessResult {
	return FreshnessResult{State: st, Reason: fmt.Sprintf("the source's length differs from the fingerprint (%d bytes, fingerprinted %d)", size, st.SourceFingerprint.ByteLength)}
}
