package engine

import (
	"crypto/sha256"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/wire"
)

// racyWindow: a verdict on files changed this close to (or after) the
// start of its judgment is not cached.
var racyWindow = 2 * time.Second

// statusFast and statusVouched are verify's (variables so that tests can
// count the judgments the cache saves).
var (
	statusFast    = verify.StatusFast
	statusVouched = verify.StatusVouched
)

// freshCache is one tree's fresh cache, loaded once per run.
type freshCache struct {
	stateSet[freshEntry]
	// loaded is when the cache was read, before the run's walk: every
	// judgment of the run (headers read, statuses) came after it.
	loaded time.Time
	// candidates were judged fresh by this run's planning (settle);
	// written are the sidecars this run wrote and verified, as read just
	// after (vouch). Both under mu.
	candidates []candidate
	written    []writtenEntry
	// layouts are the Names values met, split (nil: not valid).
	layoutMu sync.Mutex
	layouts  map[string][]string
}

// candidate is a session a status of this run found fresh.
type candidate struct {
	s  discover.Session
	st verify.StatusReport
}

// writtenEntry is the entry of a sidecar this run wrote, and the device of
// its files.
type writtenEntry struct {
	rel string
	dev uint64
	e   freshEntry
}

func loadFreshCache(tree string) *freshCache {
	c := &freshCache{loaded: time.Now(), layouts: map[string][]string{}}
	c.stateSet = loadStateSet(tree, FreshCacheName, freshCacheMax, func(e freshEntry) bool {
		if len(e.Digest) != 2*sha256.Size || len(e.Source) != sha256.Size || e.Version <= 0 || !wire.ValidUUID(e.SessionID) {
			return false // also every entry of an earlier pisess, which had no source digest
		}
		_, ok := c.layout(e.Names)
		return ok
	})
	return c
}

// Header implements discover.Headers: the header version of a session
// judged fresh, while its file's metadata is what it was then.
func (c *freshCache) Header(rel string, key discover.FileKey) (int, bool) {
	e, ok := c.get(rel)
	if !ok || e.Source != sourceDigest(key) {
		return 0, false
	}
	return e.Version, true
}

// sidecarVouched returns s's entry when its sidecar's files are as the
// entry saw them.
func (c *freshCache) sidecarVouched(s discover.Session) (freshEntry, bool) {
	e, ok := c.get(s.Rel)
	if !ok || s.Sidecar == "" {
		return freshEntry{}, false
	}
	names, ok := c.layout(e.Names)
	if !ok {
		return freshEntry{}, false
	}
	d, _, ok := metaDigest(s.Sidecar, names, time.Time{})
	return e, ok && d == e.Digest
}

// framesVouched reports whether session s's sidecar is, file for file,
// the one a refresh of this or an earlier run wrote and checked frame for
// frame (an entry with Frames, made where change times are fine): its
// frames need not be read again, nor its directories listed (names are its
// entries). The caller holds the store's locks.
func (c *freshCache) framesVouched(s discover.Session) (names []string, ok bool) {
	if c == nil || s.Rel == "" {
		return nil, false
	}
	e, ok := c.sidecarVouched(s)
	if !ok || !e.Frames {
		return nil, false
	}
	names, _ = c.layout(e.Names)
	return names, true
}

// status returns the sidecar's fast status: from the cache when an
// earlier run judged it fresh and nothing has changed since; from
// verify.StatusVouched when only the session file changed; else from
// verify.StatusFast. A status's fresh verdict makes the session a
// candidate for settle; any other verdict of StatusFast drops its entry. A
// nil cache always asks verify.StatusFast.
func (c *freshCache) status(s discover.Session) (verify.StatusReport, error) {
	if c == nil || s.Rel == "" {
		return statusFast(s.Path)
	}
	if e, ok := c.sidecarVouched(s); ok {
		key := s.Key
		if key == (discover.FileKey{}) {
			key, _ = lstatKey(s.Path)
		}
		if e.Source == sourceDigest(key) {
			return verify.StatusReport{Session: s.Path, Sidecar: s.Sidecar, Class: verify.ClassMigrated,
				SourceFormat: s.Format, Version: e.Version, HeaderID: e.SessionID, SourceBytes: s.Size,
				Entries: e.Entries, Bytes: e.Bytes}, nil
		}
		// pi wrote the session (or changed its metadata): the sidecar
		// is what the entry saw, only the session is judged again.
		st, ok := statusVouched(s.Path, verify.Vouched{HeaderID: e.SessionID, OwnerUID: e.UID, OwnerGID: e.GID,
			Entries: e.Entries, Bytes: e.Bytes, ReadID: s.HeaderID, ReadVersion: s.Version})
		if ok {
			if st.Class == verify.ClassMigrated && len(st.Findings) == 0 {
				c.addCandidate(s, st)
			}
			return st, nil
		}
	}
	st, err := statusFast(s.Path)
	if err != nil || st.Class != verify.ClassMigrated || len(st.Findings) > 0 {
		c.forget(s.Rel)
		return st, err
	}
	c.addCandidate(s, st)
	return st, nil
}

func (c *freshCache) addCandidate(s discover.Session, st verify.StatusReport) {
	c.mu.Lock()
	c.candidates = append(c.candidates, candidate{s, st})
	c.mu.Unlock()
}

// vouch records the sidecar of session s (JSONL), which this run wrote,
// verified frame for frame and committed with fingerprint fp (a refresh in
// place, under the session lock and the store mutation lock; an install,
// under the session lock, pi's lock for every write to a sidecar), and
// must be called under them: its files' metadata are read now, after the
// last write. It is cached at settle if the file
// system shows every later change (fineCtime), and if the session file is
// still exactly the one fingerprinted. v gives the header's id and the
// manifest's counters (the owner is the session file's, read here); names
// are the sidecar's entries as its verification walked them, under the
// same locks (read again when missing).
func (c *freshCache) vouch(s discover.Session, fp wire.SourceFingerprint, v verify.Vouched, names []string, seen seenKeys) {
	if c == nil || s.Rel == "" || fp.FileIdentity == nil {
		return
	}
	sidecar := discover.SidecarPath(s.Path) // s.Sidecar is "" for a session migrated now
	if len(names) == 0 || len(names) > freshMaxNames {
		var err error
		if names, err = sidecarNames(sidecar); err != nil {
			return
		}
		seen.keys = nil
	}
	var d string
	var ok bool
	if len(seen.keys) == len(names) {
		d, ok = knownDigest(sidecar, names, seen.keys, seen.changed)
	} else {
		d, _, ok = metaDigest(sidecar, names, time.Time{})
	}
	if !ok {
		return
	}
	key, ok := lstatKey(s.Path)
	id := fp.FileIdentity
	if !ok || key.Size != fp.ByteLength || key.Dev != id.Device || key.Ino != id.Inode ||
		int64(key.CtimeSec) != id.ChangeTimeSeconds || int64(key.CtimeNsec) != id.ChangeTimeNanoseconds {
		return // written since it was read: a status judges it next run
	}
	var st syscall.Stat_t
	if syscall.Lstat(sidecar, &st) != nil {
		return
	}
	e := freshEntry{Names: joinNames(names), Digest: d, Source: sourceDigest(key), Version: 3, SessionID: v.HeaderID,
		UID: uint32(key.UID), GID: uint32(key.GID), Entries: v.Entries, Bytes: v.Bytes, Frames: true}
	c.mu.Lock()
	c.written = append(c.written, writtenEntry{rel: s.Rel, dev: uint64(st.Dev), e: e})
	c.mu.Unlock()
}

// seenKeys is what a verification saw of a sidecar's entries (the
// metadata of each name, verify.Report.Keys) and which of them were
// written since: vouch reads only those again.
type seenKeys struct {
	keys    []discover.FileKey
	changed []string
}

// settle caches the verdicts of the candidates and the sidecars this run
// wrote. A status's verdict holds for the files as they are now when none
// of them changed after its judgment began (the cache's loading, before
// the walk read the session's header): every change time and
// modification time is older than that by more than the racy window
// (git's racily-clean rule; the window covers a file clock that lags).
// Their metadata, sampled now, is the digest. A sidecar written by this
// run is cached on a file system with fine change times (fineCtime). Only
// a run that writes the cache settles (the planning of a run that then
// writes nothing pays nothing for the cache): for a tree pi uses, the next
// refresh.
func (c *freshCache) settle() {
	c.mu.Lock()
	candidates, written := c.candidates, c.written
	c.candidates, c.written = nil, nil
	c.mu.Unlock()
	for _, cd := range candidates {
		s := cd.s
		names, err := sidecarNames(s.Sidecar)
		if err != nil {
			c.forget(s.Rel)
			continue
		}
		key, ok := lstatKey(s.Path)
		if !ok || racyKey(key, c.loaded) || cd.st.Version <= 0 || !wire.ValidUUID(cd.st.HeaderID) {
			c.forget(s.Rel)
			continue
		}
		d, racy, ok := metaDigest(s.Sidecar, names, c.loaded)
		if !ok || racy {
			c.forget(s.Rel)
			continue
		}
		c.put(s.Rel, freshEntry{Names: joinNames(names), Digest: d, Source: sourceDigest(key), Version: cd.st.Version,
			SessionID: cd.st.HeaderID, UID: uint32(key.UID), GID: uint32(key.GID), Entries: cd.st.Entries, Bytes: cd.st.Bytes})
	}
	if len(written) == 0 {
		return
	}
	dev, fine := fineCtime(filepath.Join(c.tree, discover.PisessDir))
	for _, w := range written {
		if fine && w.dev == dev && wire.ValidUUID(w.e.SessionID) {
			c.put(w.rel, w.e)
		} else {
			c.forget(w.rel)
		}
	}
}

func (c *freshCache) put(rel string, e freshEntry) {
	c.set(rel, e, func(old, e freshEntry) bool { return old == e })
}
