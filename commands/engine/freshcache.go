package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

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
}

// freshCache is one tree's fresh cache, loaded once per run.
type freshCache struct {
	stateSet[freshEntry]
	// candidates were judged fresh by this run's planning (settle).
	candidates []candidate
}

func loadFreshCache(tree string) *freshCache {
	return &freshCache{stateSet: loadStateSet(tree, FreshCacheName, freshCacheMax, func(e freshEntry) bool {
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

// fresh reports whether session s was judged fresh by an earlier run and
// nothing it depends on has changed since.
func (c *freshCache) fresh(s discover.Session) bool {
	e, ok := c.get(s.Rel)
	if !ok || s.Sidecar == "" {
		return false
	}
	d, _, ok := metaDigest(s.Path, s.Sidecar, e.Names, time.Time{})
	return ok && d == e.Digest
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
	if c.fresh(s) {
		return verify.StatusReport{Session: s.Path, Sidecar: s.Sidecar, Class: verify.ClassMigrated}, nil
	}
	judged := time.Now()
	st, err := statusFast(s.Path)
	if err != nil || st.Class != verify.ClassMigrated || len(st.Findings) > 0 {
		c.forget(s.Rel)
		return st, err
	}
	c.mu.Lock()
	c.candidates = append(c.candidates, candidate{s, judged})
	c.mu.Unlock()
	return st, nil
}

// candidate is a session judged fresh at a time.
type candidate struct {
	s      discover.Session
	judged time.Time
}

// settle caches the verdicts of the candidates. A verdict holds for the
// files as they are now when none of them changed after its judgment
// began: every change time and modification time is older than that by
// more than the racy window (git's racily-clean rule; the window covers a
// file clock that lags). Their metadata, sampled now, is the digest. Only
// a run that writes the cache settles (the planning of a run that then
// writes nothing pays nothing for the cache): for a tree pi uses, the
// next refresh.
func (c *freshCache) settle() {
	c.mu.Lock()
	candidates := c.candidates
	c.candidates = nil
	c.mu.Unlock()
	for _, cd := range candidates {
		s := cd.s
		names, err := sidecarNames(s.Sidecar)
		if err != nil {
			c.forget(s.Rel)
			continue
		}
		d, racy, ok := metaDigest(s.Path, s.Sidecar, names, cd.judged)
		if !ok || racy {
			c.forget(s.Rel)
			continue
		}
		c.set(s.Rel, freshEntry{Names: names, Digest: d}, func(old, e freshEntry) bool {
			return old.Digest == e.Digest && slices.Equal(old.Names, e.Names)
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

// metaDigest hashes the lstat metadata of the session file and of each
// name under the sidecar: identity, type and mode, links, owner, size and
// both times. racy is set when a time is later than racyWindow before now
// (a zero now skips that test). ok is false when a name cannot be lstat'ed.
func metaDigest(session, sidecar string, names []string, now time.Time) (digest string, racy, ok bool) {
	h := sha256.New()
	var buf [8 * 11]byte
	add := func(p string) bool {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return false
		}
		b := buf[:0]
		for _, v := range []uint64{st.Dev, st.Ino, uint64(st.Mode), uint64(st.Nlink), uint64(st.Uid), uint64(st.Gid),
			uint64(st.Size), uint64(st.Mtim.Sec), uint64(st.Mtim.Nsec), uint64(st.Ctim.Sec), uint64(st.Ctim.Nsec)} {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		h.Write(b)
		if !now.IsZero() {
			for _, t := range []time.Time{time.Unix(st.Mtim.Sec, st.Mtim.Nsec), time.Unix(st.Ctim.Sec, st.Ctim.Nsec)} {
				if now.Sub(t) < racyWindow {
					racy = true
				}
			}
		}
		return true
	}
	if !add(session) {
		return "", false, false
	}
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
		if !add(filepath.Join(sidecar, n)) {
			return "", false, false
		}
	}
	return hex.EncodeToString(h.Sum(nil)), racy, true
}
