package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"pisess/ledger"
	"pisess/writers/durable"
)

// The small state files a tree keeps in .pisess/ (refused.json,
// refresh.json) are one JSON document each, {"version":1,"sessions":{…}}
// keyed by tree-relative session paths. They only save work: read as
// untrusted data (never followed, bounded, a wrong version or bad JSON is
// empty) and written whole, atomically, owned by the tree's owner.

// stateFile is the document of such a file.
type stateFile[E any] struct {
	Version  int          `json:"version"`
	Sessions map[string]E `json:"sessions"`
}

// readStateFile returns the entries of .pisess/name in tree whose key is a
// local path and that keep(entry) accepts; nothing when the file is
// missing, not a regular file, over max bytes or not version 1.
func readStateFile[E any](tree, name string, max int64, keep func(E) bool) map[string]E {
	out := map[string]E{}
	f, err := durable.OS.OpenNoFollow(filepath.Join(tree, ledger.PisessDir, name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return out
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return out
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil || int64(len(b)) > max {
		return out
	}
	var doc stateFile[E]
	if json.Unmarshal(b, &doc) != nil || doc.Version != 1 {
		return out
	}
	for rel, e := range doc.Sessions {
		// Keys are tree-relative names, never addresses: anything that
		// could leave the tree is dropped.
		if filepath.IsLocal(rel) && keep(e) {
			out[rel] = e
		}
	}
	return out
}

// writeStateFile replaces .pisess/name in tree with entries.
func writeStateFile[E any](ops durable.Ops, tree, name string, entries map[string]E) error {
	b, err := json.Marshal(stateFile[E]{Version: 1, Sessions: entries})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	dir := filepath.Join(tree, ledger.PisessDir)
	if err := ops.WriteFileAtomic(dir, dir, name, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	uid, gid, err := ops.Owner(tree)
	if err == nil {
		err = ops.ChownIfRoot(filepath.Join(dir, name), uid, gid)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
