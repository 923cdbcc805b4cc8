package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"pisess/readers/discover"
	"pisess/verify"
)

// FreshCacheName is the fresh cache in a tree's .pisess/: for each session
// the last run judged fresh (verify.StatusFast: class migrated, nothing
// found), a digest of the metadata of the session file and of every file
// and directory of its sidecar, all of them older than the judgment. A
// cron run finds the same digest with one lstat per file and skips the
// session without opening anything (issue 14: a run over a tree of fresh
// sessions costs its walk, not a status of each).
//
// Every write to a file moves its change time, and so does every chmod,
// chown, link or rename; a file added to or removed from a directory moves
// the directory's. Change times cannot be set back (pi's own freshness
// check trusts them the same way, FORMAT.md §8). A verdict is cached only
// when every time is older than the start of its judgment by 2 s (git's
// "racily clean" rule): a file changed during or after the judgment, or
// in the same tick of a lagging file clock, is judged again next run. The
// cache is settled and saved only by a run that writes to the tree anyway:
// a run with nothing to do writes nothing (and pays nothing for the
// cache).
const FreshCacheName = "fresh.json"

// freshCacheMax bounds what is read of the cache (data in a user's tree:
// it only ever makes pisess skip a session whose files are unchanged).
const freshCacheMax = 32 << 20

// freshMaxNames bounds the entries of one sidecar the cache follows: a
// sidecar with more (many segments) is judged every run.
const freshMaxNames = 64

// racyWindow: a verdict on files changed this close to (or after) the
// start of its judgment is not cached.
var racyWindow = 2 * time.Second

// statusFast is verify.StatusFast (a variable so that tests can count the
// judgments the cache saves).
var statusFast = verify.StatusFast

type freshEntry struct {
	// Names are the sidecar's entries, relative to it ("" is the sidecar
	// directory itself).
	Names []string `json:"names"`
	// Digest covers the session file and every name.
	Digest string `json:"digest"`
	// Source is a digest of the session file's metadata alone, and
	// Version its header's version: while the file is unchanged, the
	// walk takes the version from here instead of reading the header
	// (discover.Headers). Absent in caches of earlier versions.
	Source  string `json:"source,omitempty"`
	Version int    `json:"version,omitempty"`
}

// freshCache is one tree's fresh cache, loaded once per run.
type freshCache struct {
	stateSet[freshEntry]
	// loaded is when the cache was read, before the run's walk: every
	// judgment of the run (headers read, statuses) came after it.
	loaded time.Time
	// candidates were judged fresh by this run's planning (settle).
	candidates []discover.Session
}

func loadFreshCache(tree string) *freshCache {
	return &freshCache{loaded: time.Now(), stateSet: loadStateSet(tree, FreshCacheName, freshCacheMax, func(e freshEntry) bool {
		if len(e.Names) == 0 || len(e.Names) > freshMaxNames || len(e.Digest) != 2*sha256.Size {
			return false
		}
		for _, n := range e.Names {
			// Names stay inside the sidecar: never an address elsewhere.
			if n != "" && (!filepath.IsLocal(n) || n != filepath.Clean(n)) {
				return false
			}
		}
		return true
	})}
}

// Header implements discover.Headers: the header version of a session
// judged fresh, while its file's metadata is what it was then.
func (c *freshCache) Header(rel string, key discover.FileKey) (int, bool) {
	e, ok := c.get(rel)
	if !ok || e.Version == 0 || e.Source == "" || e.Source != sourceDigest(key) {
		return 0, false
	}
	return e.Version, true
}

// fresh reports whether session s was judged fresh by an earlier run and
// nothing it depends on has changed since; upgrade, whether its entry
// lacks what this version keeps (the header's version). The session
// file's metadata is discovery's (s.Key, taken as the walk listed it) when
// it has it.
func (c *freshCache) fresh(s discover.Session) (fresh, upgrade bool) {
	e, ok := c.get(s.Rel)
	if !ok || s.Sidecar == "" {
		return false, false
	}
	key := s.Key
	if key == (discover.FileKey{}) {
		if key, ok = lstatKey(s.Path); !ok {
			return false, false
		}
	}
	d, _, ok := metaDigest(key, s.Sidecar, e.Names, time.Time{})
	return ok && d == e.Digest, e.Version == 0 && s.Version > 0
}

// status returns the sidecar's fast status: from the cache when an
// earlier run judged it fresh and nothing has changed since, else from
// verify.StatusFast. A fresh verdict makes the session a candidate for
// settle; any other drops its entry. A nil cache always asks
// verify.StatusFast.
func (c *freshCache) status(s discover.Session) (verify.StatusReport, error) {
	if c == nil || s.Rel == "" {
		return statusFast(s.Path)
	}
	if fresh, upgrade := c.fresh(s); fresh {
		if upgrade {
			// An entry of an earlier version: settled again with the
			// header's version.
			c.mu.Lock()
			c.candidates = append(c.candidates, s)
			c.mu.Unlock()
		}
		return verify.StatusReport{Session: s.Path, Sidecar: s.Sidecar, Class: verify.ClassMigrated}, nil
	}
	st, err := statusFast(s.Path)
	if err != nil || st.Class != verify.ClassMigrated || len(st.Findings) > 0 {
		c.forget(s.Rel)
		return st, err
	}
	c.mu.Lock()
	c.candidates = append(c.candidates, s)
	c.mu.Unlock()
	return st, nil
}

// settle caches the verdicts of the candidates. A verdict holds for the
// files as they are now when none of them changed after its judgment
// began (the cache's loading, before the walk read the session's header):
// every change time and modification time is older than that by more
// than the racy window (git's racily-clean rule; the window covers a
// file clock that lags). Their metadata, sampled now, is the digest. Only
// a run that writes the cache settles (the planning of a run that then
// writes nothing pays nothing for the cache): for a tree pi uses, the
// next refresh.
func (c *freshCache) settle() {
	c.mu.Lock()
	candidates := c.candidates
	c.candidates = nil
	c.mu.Unlock()
	for _, s := range candidates {
		names, err := sidecarNames(s.Sidecar)
		if err != nil {
			c.forget(s.Rel)
			continue
		}
		key, ok := lstatKey(s.Path)
		if !ok || racyKey(key, c.loaded) {
			c.forget(s.Rel)
			continue
		}
		d, racy, ok := metaDigest(key, s.Sidecar, names, c.loaded)
		if !ok || racy {
			c.forget(s.Rel)
			continue
		}
		e := freshEntry{Names: names, Digest: d}
		if s.Version > 0 {
			e.Source, e.Version = sourceDigest(key), s.Version
		}
		c.set(s.Rel, e, func(old, e freshEntry) bool {
			return old.Digest == e.Digest && slices.Equal(old.Names, e.Names) && old.Source == e.Source && old.Version == e.Version
		})
	}
}

// sidecarNames lists the sidecar's entries (directories walked, symlinks
// and special files listed, not followed), sorted; at most freshMaxNames.
func sidecarNames(sidecar string) ([]string, error) {
	names := []string{""}
	err := filepath.WalkDir(sidecar, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == sidecar {
			return nil
		}
		if len(names) == freshMaxNames {
			return errTooManyNames
		}
		names = append(names, strings.TrimPrefix(p, sidecar+string(filepath.Separator)))
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

var errTooManyNames = errors.New("too many entries to cache")

// metaDigest hashes the metadata of the session file (its key) and the
// lstat metadata of each name under the sidecar: identity, type and mode,
// links, owner, size and both times. racy is set when a time of a name is
// later than racyWindow before now (a zero now skips that test). ok is
// false when a name cannot be lstat'ed.
func metaDigest(session discover.FileKey, sidecar string, names []string, now time.Time) (digest string, racy, ok bool) {
	h := sha256.New()
	buf := make([]byte, 0, 8*11)
	h.Write(session.AppendBinary(buf))
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
		k, ok := lstatKey(filepath.Join(sidecar, n))
		if !ok {
			return "", false, false
		}
		h.Write(k.AppendBinary(buf))
		if !now.IsZero() && racyKey(k, now) {
			racy = true
		}
	}
	return hex.EncodeToString(h.Sum(nil)), racy, true
}

// sourceDigest is the digest of a session file's metadata (freshEntry.Source).
func sourceDigest(k discover.FileKey) string {
	sum := sha256.Sum256(k.AppendBinary(make([]byte, 0, 8*11)))
	return hex.EncodeToString(sum[:16])
}

// lstatKey is the lstat metadata of path.
func lstatKey(path string) (discover.FileKey, bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return discover.FileKey{}, false
	}
	return discover.KeyOfStat(&st), true
}

// racyKey reports whether a time of k is later than racyWindow before now.
func racyKey(k discover.FileKey, now time.Time) bool {
	for _, t := range []time.Time{time.Unix(int64(k.MtimeSec), int64(k.MtimeNsec)), time.Unix(int64(k.CtimeSec), int64(k.CtimeNsec))} {
		if now.Sub(t) < racyWindow {
			return true
		}
	}
	return false
}
