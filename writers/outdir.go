package writers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"pisess/readers"
	"pisess/writers/durable"
	"pisess/writers/store"
)

// A store built into a directory of the caller's (`pisess build`, plumbing
// for demos and tests) is staged in a sibling of it (OutDirStaging) and
// renamed into place only once sealed (InstallOutDir), so the directory
// never holds a partial store.

// OutDirError says why a store may not be built into Dir: it exists and
// replacing it was not asked (Exists), or it is neither an empty directory
// nor a V2 store, the only things CheckOutDir lets be replaced (Reason). An
// error of the caller's choice of directory, never of the disk.
type OutDirError struct {
	Dir    string
	Exists bool
	Reason string
}

func (e *OutDirError) Error() string {
	if e.Exists {
		return e.Dir + " already exists"
	}
	return e.Dir + " " + e.Reason
}

// CheckOutDir decides what to do with an existing out: nothing there is
// fine; with replace, an empty directory or a V2 store is replaced;
// anything else is an *OutDirError (a store build never deletes what it
// cannot recognise).
func CheckOutDir(out string, replace bool) (bool, error) {
	fi, err := os.Lstat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case !replace:
		return false, &OutDirError{Dir: out, Exists: true}
	case !fi.IsDir():
		return false, &OutDirError{Dir: out, Reason: "exists and is not a directory"}
	}
	names, err := os.ReadDir(out)
	if err != nil {
		return false, err
	}
	known := map[string]bool{store.ManifestName: true, store.SegmentsDir: true, store.IndexDir: true,
		store.CheckpointsDir: true, store.MigrationsDir: true, store.SourceStateName: true,
		store.TmpDir: true, store.MutationLockName: true}
	hasStoreFile := false
	for _, n := range names {
		if !known[n.Name()] {
			return false, &OutDirError{Dir: out, Reason: fmt.Sprintf("holds %q, so it is not a V2 store", n.Name())}
		}
		hasStoreFile = hasStoreFile || n.Name() == store.ManifestName || n.Name() == store.SegmentsDir
	}
	if len(names) > 0 && !hasStoreFile {
		return false, &OutDirError{Dir: out, Reason: "has neither manifest.json nor segments/, so it is not a V2 store"}
	}
	return true, nil
}

// OutDirStaging is a fresh staging sibling of out to Stage into.
func OutDirStaging(out string) string { return out + ".staging." + hex32() }

// BuildOutDir writes a store of src into out (`pisess build`): staged in
// a fresh sibling of it (OutDirStaging) and renamed into place only once
// sealed (InstallOutDir; replace is CheckOutDir's answer), so out never
// holds a partial store. On failure the staging directory is removed.
func BuildOutDir(ctx context.Context, log zerolog.Logger, session string, src readers.Source, out string, replace bool, opt StageOptions) (StageResult, error) {
	staging := OutDirStaging(out)
	log.Debug().Str("session", session).Str("staging", staging).Msg("building store")
	res, err := Stage(ctx, src, staging, opt)
	if err == nil {
		err = InstallOutDir(staging, out, replace)
	}
	if err != nil {
		if rerr := durable.OS.RemoveAll(staging); rerr != nil {
			log.Warn().Err(rerr).Str("staging", staging).Msg("could not remove the staging directory")
		}
		return res, err
	}
	return res, nil
}

// InstallOutDir renames the sealed staging store to out. An existing out
// (which CheckOutDir accepted) is first moved aside to a backup sibling and
// removed only once the new store is in place, so a crash leaves one or
// the other.
func InstallOutDir(staging, out string, replace bool) error {
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
