package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"syscall"

	// The state files are read and written by every run; this drop-in
	// for encoding/json decodes them several times faster (issue 14: a
	// megabyte for a tree of 2,000 sessions, before the walk can end).
	json "github.com/segmentio/encoding/json"

	"pisess/writers/durable"
)

// The small state files a tree keeps in .pisess/ (refused.json,
// fresh.json, refresh.json) are one JSON document each,
// {"version":1,"pisess":STAMP,"sessions":{…}} keyed by tree-relative
// session paths. They only save work: read as untrusted data (never
// followed, bounded, a wrong version, another stamp or bad JSON is empty)
// and written whole, atomically, owned by the tree's owner.

// StateFile is the document of such a file.
type StateFile[E any] struct {
	Version int `json:"version"`
	// Pisess is the stamp of the pisess that wrote the file (Stamp): a
	// verdict, a refusal or a record is only as good as the code that
	// made it, so a file of another build is not read (issue 34 §4: an
	// older pisess's verdicts stood until pi wrote the session).
	Pisess   string       `json:"pisess"`
	Sessions map[string]E `json:"sessions"`
}

// stateFormat numbers what the state files' entries mean; it changes
// with the rules that make them (2: fresh verdicts come from a status at
// least as deep as pi's open, issue 34 §2).
const stateFormat = 2

// Stamp is what the state files this pisess writes carry in "pisess": its
// module version, its VCS revision (dirty when built from a modified
// tree) and stateFormat. A file carrying any other is ignored.
var Stamp = sync.OnceValue(func() string {
	version, rev, dirty := "(unknown)", "unknown revision", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision":
				rev = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "+dirty"
			}
		}
	}
	return fmt.Sprintf("pisess %s (%s%s) (state format %d)", version, rev, dirty, stateFormat)
})

// current reports whether a state document is one this pisess reads.
func current[E any](doc StateFile[E]) bool {
	return doc.Version == 1 && doc.Pisess == Stamp() && doc.Sessions != nil
}

// readStateFile returns the entries of .pisess/name in tree whose key is a
// local path and that keep(entry) accepts; nothing when the file is
// missing, not a regular file, over max bytes, not version 1 or of
// another stamp (Stamp). buf holds
// the bytes read (the decoded entries do not refer to it): the save that
// follows encodes into it, so that neither allocates a megabyte afresh.
func readStateFile[E any](tree, name string, max int64, keep func(E) bool) (out map[string]E, buf []byte, dropped bool) {
	out = map[string]E{}
	b, ok := readStateBytes(tree, name, max)
	if !ok {
		return out, b, false
	}
	var doc StateFile[E]
	if json.Unmarshal(b, &doc) != nil || !current(doc) {
		return out, b, false
	}
	for rel, e := range doc.Sessions {
		// Keys are tree-relative names, never addresses: anything that
		// could leave the tree is dropped.
		if !filepath.IsLocal(rel) || !keep(e) {
			delete(doc.Sessions, rel)
			dropped = true
		}
	}
	return doc.Sessions, b, dropped
}

// readStateRaw is readStateFile without decoding the entries: each is
// the JSON of one (checked to be JSON, not to be an entry), its bytes
// those of buf.
func readStateRaw(tree, name string, max int64) (out map[string]json.RawMessage, buf []byte) {
	out = map[string]json.RawMessage{}
	b, ok := readStateBytes(tree, name, max)
	if !ok {
		return out, b
	}
	var doc StateFile[json.RawMessage]
	rest, err := json.Parse(b, &doc, json.DontCopyRawMessage)
	if err != nil || len(bytes.TrimSpace(rest)) > 0 || !current(doc) {
		return out, b // as Unmarshal, nothing may follow the document
	}
	for rel := range doc.Sessions {
		if !filepath.IsLocal(rel) {
			delete(doc.Sessions, rel)
		}
	}
	return doc.Sessions, b
}

// readStateBytes reads .pisess/name in tree: ok is false when it is
// missing, not a regular file, over max bytes or cut short.
func readStateBytes(tree, name string, max int64) (b []byte, ok bool) {
	f, err := durable.OS.OpenNoFollow(filepath.Join(tree, PisessDir, name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > max {
		return nil, false
	}
	b = make([]byte, fi.Size(), fi.Size()+fi.Size()/8+4096)
	if _, err := io.ReadFull(f, b); err != nil {
		return b, false // shorter than it said: written meanwhile
	}
	return b, true
}

// stateFileFlags encode a state file: keys sorted (the same entries, the
// same bytes), nothing escaped that JSON does not require.
const stateFileFlags = json.SortMapKeys | json.TrustRawMessage

// writeStateFile replaces .pisess/name in tree with entries, atomically
// but without a sync: every entry is checked against the files it speaks
// of before it is used, so the file a crash leaves (the old one, or none)
// only costs work, and a run is spared the sync of a megabyte (issue 14).
func writeStateFile[E any](ops durable.Ops, tree, name string, entries map[string]E, buf []byte) error {
	// encoding/json's Marshal, into buf, but for HTML escaping: a state
	// file is never embedded in a page, and escaping scanned every raw
	// entry again (most of the encoding of a megabyte of records).
	// TrustRawMessage: a lazily read set's raw entries were parsed as
	// JSON when read (readStateRaw), the others are encoded here.
	b, err := json.Append(buf[:0], StateFile[E]{Version: 1, Pisess: Stamp(), Sessions: entries}, stateFileFlags)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	dir := filepath.Join(tree, PisessDir)
	ops.DeferSync = true
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

// stateSet is the entries of one such file, loaded once per run and shared
// by the run's workers. A set read lazily (loadLazyStateSet) keeps the
// entries not asked for yet as the file's JSON (raw), decoded (and
// checked with keep) when first asked for: a run uses few of a tree's
// refresh records, and decoding all of them was most of the reading.
type stateSet[E any] struct {
	tree, name string
	mu         sync.Mutex
	entries    map[string]E
	raw        map[string]json.RawMessage // lazily read: not decoded yet
	keep       func(E) bool
	changed    bool
	buf        []byte // readStateFile's
}

// loadStateSet reads .pisess/name in tree (readStateFile). A file some
// of whose entries were dropped is written again by the next Save, even
// when the run changes nothing else: what it dropped must not stay there
// for an older pisess, or a reader of the file, to take as said.
func loadStateSet[E any](tree, name string, max int64, keep func(E) bool) stateSet[E] {
	entries, buf, dropped := readStateFile(tree, name, max, keep)
	return stateSet[E]{tree: tree, name: name, entries: entries, buf: buf, changed: dropped}
}

// loadLazyStateSet reads .pisess/name in tree, each entry decoded when
// first asked for (readStateRaw).
func loadLazyStateSet[E any](tree, name string, max int64, keep func(E) bool) stateSet[E] {
	raw, buf := readStateRaw(tree, name, max)
	return stateSet[E]{tree: tree, name: name, entries: map[string]E{}, raw: raw, keep: keep, buf: buf}
}

func (c *stateSet[E]) Get(rel string) (E, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookup(rel)
}

// Tree is the tree whose .pisess/ holds the file.
func (c *stateSet[E]) Tree() string { return c.tree }

// Len is the number of entries, those not decoded yet included.
func (c *stateSet[E]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries) + len(c.raw)
}

// lookup is Get with c.mu held: an entry not decoded yet is decoded now,
// or dropped (as readStateFile drops it) when it is not one keep accepts.
func (c *stateSet[E]) lookup(rel string) (E, bool) {
	if e, ok := c.entries[rel]; ok {
		return e, true
	}
	r, ok := c.raw[rel]
	if !ok {
		var none E
		return none, false
	}
	delete(c.raw, rel)
	var e E
	if json.Unmarshal(r, &e) != nil || !c.keep(e) {
		var none E
		return none, false
	}
	c.entries[rel] = e
	return e, true
}

// set records e for rel; same says when an old entry already says it.
func (c *stateSet[E]) Set(rel string, e E, same func(old, e E) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.lookup(rel); ok && same(old, e) {
		return
	}
	c.entries[rel] = e
	c.changed = true
}

func (c *stateSet[E]) Forget(rel string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.lookup(rel); ok {
		delete(c.entries, rel)
		c.changed = true
	}
}

// save writes the file atomically when an entry changed (a run that
// changed nothing writes nothing), first dropping the sessions whose file
// is gone: those listed by this run's walk (listed, nil for none) are
// there, the others are looked up. .pisess/ exists: the run holds the
// tree lock. The entries never asked for are written as they were read.
func (c *stateSet[E]) Save(ops durable.Ops, listed map[string]bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.changed {
		return nil
	}
	gone := func(rel string) bool {
		if listed[rel] {
			return false
		}
		_, err := os.Lstat(filepath.Join(c.tree, rel))
		return errors.Is(err, fs.ErrNotExist)
	}
	for rel := range c.entries {
		if gone(rel) {
			delete(c.entries, rel)
		}
	}
	var err error
	if c.raw == nil {
		err = writeStateFile(ops, c.tree, c.name, c.entries, c.buf)
	} else {
		err = c.saveLazy(ops, gone)
	}
	if err != nil {
		return err
	}
	c.changed = false
	return nil
}

// saveLazy is save's write of a lazily read set: the entries never asked
// for as they were read, the others encoded.
func (c *stateSet[E]) saveLazy(ops durable.Ops, gone func(rel string) bool) error {
	all := make(map[string]json.RawMessage, len(c.entries)+len(c.raw))
	for rel, r := range c.raw {
		if !gone(rel) {
			all[rel] = r
		}
	}
	// The entries asked for are encoded one after the other into one
	// buffer (a few hundred bytes each, grown from nothing they were
	// most of the save).
	enc := make([]byte, 0, len(c.entries)*(len(c.buf)/max(len(c.raw)+len(c.entries), 1)+64))
	for rel, e := range c.entries {
		start := len(enc)
		var err error
		if enc, err = json.Append(enc, e, stateFileFlags); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		all[rel] = enc[start:len(enc):len(enc)]
	}
	// The raw entries are c.buf's bytes: the file is encoded elsewhere.
	return writeStateFile(ops, c.tree, c.name, all, make([]byte, 0, len(c.buf)+len(c.buf)/8))
}
