package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"pisess/readers/discover"
	"pisess/writers"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// BuildOptions configure Build.
type BuildOptions struct {
	// Session is the session file (.jsonl or .sqlite).
	Session string
	// OutDir is where the store goes; it must not exist unless Force.
	OutDir string
	// MaxSegmentBytes is the segment rollover size: 0 means 64 MiB, the
	// most pi reads.
	MaxSegmentBytes int64
	// Force replaces an existing OutDir that is an empty directory or a V2
	// store (anything else is refused: build never deletes what it cannot
	// recognise).
	Force bool
	// Clock stamps what is written; nil means the wall clock.
	Clock func() time.Time
	// Progress, when set, is called after each entry with the bytes its
	// frame added.
	Progress func(bytes int64)
}

// BuildReport describes the store Build wrote.
type BuildReport struct {
	Session      string `json:"session"`
	Store        string `json:"store"`
	SessionID    string `json:"sessionId"`
	SourceFormat string `json:"sourceFormat"`
	Entries      uint64 `json:"entries"`
	Bytes        uint64 `json:"bytes"`
	Segments     uint64 `json:"segments"`
	ChainHash    string `json:"chainHash"`
	// Replaced is true when Force replaced an existing OutDir.
	Replaced bool `json:"replaced"`
}

// Tally: a store that was built has no problems; a session that could not
// be built is an error.
func (BuildReport) Tally() Tally { return Tally{} }

// Build reads one session and writes a V2 store of it into opt.OutDir, the
// way the reference's migration fills its staging store, but without a
// ledger event, source state, lock or installation beside the session: it
// is plumbing for demos and tests, not the migration. The store is built in
// a sibling staging directory and renamed into place only once sealed, so
// OutDir never holds a partial store; on failure the staging directory is
// removed. A session the reference's model refuses is an error holding a
// *readers.RefusedError (see AsRefused).
func Build(ctx context.Context, opt BuildOptions) (BuildReport, error) {
	log := zerolog.Ctx(ctx)
	if opt.MaxSegmentBytes < 0 || opt.MaxSegmentBytes > wire.MaxSegmentBytes {
		return BuildReport{}, Usagef("--max-segment-bytes %d: want 1 to %d (64 MiB, the most pi reads)", opt.MaxSegmentBytes, wire.MaxSegmentBytes)
	}
	out := filepath.Clean(opt.OutDir)
	replace, err := checkOutDir(out, opt.Force)
	if err != nil {
		return BuildReport{}, err
	}
	src, err := discover.OpenSource(opt.Session)
	if err != nil {
		return BuildReport{}, fmt.Errorf("build: %w", err)
	}
	defer src.Close()

	staging := out + ".staging." + hex32()
	log.Debug().Str("session", opt.Session).Str("staging", staging).Msg("building store")
	res, err := writers.Stage(ctx, src, staging, writers.StageOptions{
		MaxSegmentBytes: opt.MaxSegmentBytes,
		Clock:           opt.Clock,
		Ops:             durable.OS,
		Progress:        opt.Progress,
	})
	if err == nil {
		err = install(staging, out, replace)
	}
	if err != nil {
		if rerr := durable.OS.RemoveAll(staging); rerr != nil {
			log.Warn().Err(rerr).Str("staging", staging).Msg("could not remove the staging directory")
		}
		return BuildReport{}, fmt.Errorf("build: %w", err)
	}
	h := src.Header()
	log.Debug().Str("store", out).Uint64("entries", res.Entries).Msg("store built")
	return BuildReport{
		Session:      opt.Session,
		Store:        out,
		SessionID:    h.ID,
		SourceFormat: string(h.Format),
		Entries:      res.Entries,
		Bytes:        res.Bytes,
		Segments:     res.Manifest.Files.SegmentCount,
		ChainHash:    res.ChainHash,
		Replaced:     replace,
	}, nil
}

// checkOutDir decides what to do with an existing out: nothing there is
// fine; with force, an empty directory or a V2 store is replaced; anything
// else is a usage error.
func checkOutDir(out string, force bool) (replace bool, err error) {
	fi, err := os.Lstat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("build: %w", err)
	case !force:
		return false, Usagef("%s already exists (--force replaces an empty directory or a V2 store)", out)
	case !fi.IsDir():
		return false, Usagef("%s exists and is not a directory: --force replaces only an empty directory or a V2 store", out)
	}
	names, err := os.ReadDir(out)
	if err != nil {
		return false, fmt.Errorf("build: %w", err)
	}
	known := map[string]bool{store.ManifestName: true, store.SegmentsDir: true, store.IndexDir: true,
		store.CheckpointsDir: true, store.MigrationsDir: true, store.SourceStateName: true,
		store.TmpDir: true, store.MutationLockName: true}
	hasStoreFile := false
	for _, n := range names {
		if !known[n.Name()] {
			return false, Usagef("%s holds %q, so it is not a V2 store: --force replaces only an empty directory or a V2 store", out, n.Name())
		}
		hasStoreFile = hasStoreFile || n.Name() == store.ManifestName || n.Name() == store.SegmentsDir
	}
	if len(names) > 0 && !hasStoreFile {
		return false, Usagef("%s has neither manifest.json nor segments/, so it is not a V2 store: --force replaces only an empty directory or a V2 store", out)
	}
	return true, nil
}

// install renames the sealed staging store to out. An existing out (which
// checkOutDir accepted) is first moved aside to a backup sibling and removed
// only once the new store is in place, so a crash leaves one or the other.
func install(staging, out string, replace bool) error {
	if !replace {
		return durable.OS.RenameNoReplace(staging, out)
	}
	backup := out + ".backup." + hex32()
	if err := durable.OS.RenameNoReplace(out, backup); err != nil {
		return err
	}
	if err := durable.OS.RenameNoReplace(staging, out); err != nil {
		if rerr := durable.OS.RenameNoReplace(backup, out); rerr != nil {
			return errors.Join(err, fmt.Errorf("restore %s from %s: %w", out, backup, rerr))
		}
		return err
	}
	return durable.OS.RemoveAll(backup)
}

// hex32 is a fresh UUID as 32 lower-case hex digits, the suffix FORMAT.md §1
// gives staging and backup siblings.
func hex32() string {
	u := uuid.New()
	return fmt.Sprintf("%x", u[:])
}
