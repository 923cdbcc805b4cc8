package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"pisess/writers/wire"
)

// Inspection describes one store: its manifest as recorded, its contents
// as measured, and every problem Check finds (`pisess inspect`).
type Inspection struct {
	Store string `json:"store"`
	// Manifest is nil when manifest.json is missing or unreadable (Check
	// then lists why); ManifestErr is the error that reading it met.
	Manifest    *wire.Manifest `json:"-"`
	ManifestErr error          `json:"-"`
	Counts      Counts         `json:"counts"`
	Problems    []FileProblem  `json:"problems"`
}

// Counts are measured from the store's files, not copied from the
// manifest, so that a manifest that disagrees shows. When reading stopped
// at damage, Complete is false and the counts cover what was read.
type Counts struct {
	Entries      uint64 `json:"entries"`
	Messages     uint64 `json:"messages"`
	Branches     uint64 `json:"branches"` // parent ids with more than one child
	Compactions  uint64 `json:"compactions"`
	Bytes        uint64 `json:"bytes"` // frame lines with their newlines
	Segments     uint64 `json:"segments"`
	Checkpoints  uint64 `json:"checkpoints"`
	LedgerEvents uint64 `json:"ledgerEvents"`
	Complete     bool   `json:"complete"`
}

// FileProblem is one Problem of Check as an inspection reports it: File
// is relative to the store root; Segment and Offset place it in a segment,
// Line in a line document (index, ledger); zero when not applicable.
type FileProblem struct {
	Class   string `json:"class"`
	File    string `json:"file"`
	Segment uint64 `json:"segment,omitempty"`
	Offset  int64  `json:"offset,omitempty"`
	Line    int64  `json:"line,omitempty"`
	Detail  string `json:"detail"`
}

// ManifestDocument returns the manifest as the store's manifest.json holds
// it (pretty-printed, FORMAT.md §5), nil when there is none.
func (r Inspection) ManifestDocument() []byte {
	if r.Manifest == nil {
		return nil
	}
	return wire.AppendManifest(nil, *r.Manifest)
}

// Inspect reads the store at dir without writing or locking anything. An
// error means the store could not be opened at all (dir missing, not a
// directory, reached through a symlink, or holding none of a store's
// parts); everything else is a problem in the inspection.
func Inspect(ctx context.Context, dir string) (Inspection, error) {
	// A damaged store is reported (exit 4); a directory with none of a
	// store's parts is not a store at all (an operational error, 8).
	any := false
	for _, part := range []string{"manifest.json", "segments", "index"} {
		if _, err := os.Lstat(filepath.Join(dir, part)); err == nil {
			any = true
		}
	}
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() && !any {
		return Inspection{}, fmt.Errorf("inspect %s: not a V2 store (it has no manifest.json, segments/ or index/)", dir)
	}
	st, err := Open(dir, ReadOptions{})
	if err != nil {
		return Inspection{}, fmt.Errorf("inspect %s: %w", dir, err)
	}
	rep := Inspection{Store: dir, Problems: []FileProblem{}}
	if m, err := st.Manifest(); err == nil {
		rep.Manifest = &m
	} else {
		rep.ManifestErr = err
	}
	rep.Counts, err = measure(ctx, st)
	if err != nil {
		return Inspection{}, err
	}
	for _, p := range st.Check() {
		rep.Problems = append(rep.Problems, FileProblem{
			Class:   string(p.Class),
			File:    relative(dir, p.Path),
			Segment: p.Segment,
			Offset:  p.Offset,
			Line:    p.Line,
			Detail:  p.Detail,
		})
	}
	return rep, nil
}

// measure counts what the store holds, reading every frame once.
func measure(ctx context.Context, st *Store) (Counts, error) {
	c := Counts{Complete: true}
	it := st.Entries()
	defer it.Close()
	children := map[string]uint32{}
	segments := map[uint64]bool{}
	for it.Next() {
		if err := ctx.Err(); err != nil {
			return Counts{}, err
		}
		f, row := it.Frame(), it.Row()
		c.Entries++
		c.Bytes += row.ByteLength
		segments[row.SegmentSeq] = true
		switch f.EntryType {
		case wire.EntryMessage:
			c.Messages++
		case wire.EntryCompaction:
			c.Compactions++
		}
		if f.ParentEntryID != "" {
			children[f.ParentEntryID]++
			if children[f.ParentEntryID] == 2 {
				c.Branches++
			}
		}
	}
	if it.Err() != nil {
		c.Complete = false
	}
	c.Segments = uint64(len(segments))
	if cps, err := st.Checkpoints(); err == nil {
		c.Checkpoints = uint64(len(cps))
	} else {
		c.Complete = false
	}
	if evs, err := st.Ledger(); err == nil {
		c.LedgerEvents = uint64(len(evs))
	} else {
		c.Complete = false
	}
	return c, nil
}

func relative(root, path string) string {
	if rel, err := filepath.Rel(root, path); err == nil && filepath.IsLocal(rel) {
		return filepath.ToSlash(rel)
	}
	return path
}

// ManifestEntries is the entry count the manifest of the sidecar at dir
// states, 0 when there is none to read.
func ManifestEntries(dir string) uint64 {
	st, err := Open(dir, ReadOptions{OnceManifest: true})
	if err != nil {
		return 0
	}
	m, err := st.Manifest()
	if err != nil {
		return 0
	}
	return m.Counters.EntriesTotal
}
