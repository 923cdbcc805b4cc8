package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// FreshCacheName is the fresh cache in a tree's .pisess/: for each session
// whose sidecar a run found fresh (verify.StatusFast: class migrated,
// nothing found) or wrote and verified itself, a digest of the metadata of
// every file and directory of the sidecar and one of the session file's,
// with what that status saw (the header's version and id, the session's
// owner, the manifest's counters). A cron run finds the same digests with
// one lstat per file and skips the session without opening anything
// (issue 14: a run over a tree of fresh sessions costs its walk, not a
// status of each); when only the session file changed (pi appended to it),
// the sidecar is vouched for and only the session is read
// (verify.StatusVouched).
//
// Every write to a file moves its change time, and so does every chmod,
// chown, link or rename; a file added to or removed from a directory moves
// the directory's. Change times cannot be set back (pi's own freshness
// check trusts them the same way, FORMAT.md §8). A change in the same tick
// of a coarse file clock as the metadata was read would not show, so a
// verdict is cached only for metadata that cannot hide one:
//   - a status's verdict, when every time is older than the start of the
//     run by 2 s (git's "racily clean" rule): a file changed during or
//     after the judgment, or in the same tick of a lagging file clock, is
//     judged again next run;
//   - a sidecar this run wrote (a refresh in place), read under its locks
//     just after the last write, when the tree's file system gives every
//     change made after a file's times were read a new change time
//     (fineCtime: Linux's multigrain timestamps, 6.13 and later), so that
//     any later change shows.
//
// The cache is settled and saved only by a run that writes to the tree
// anyway: a run with nothing to do writes nothing (and pays nothing for
// the cache).
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

// statusFast and statusVouched are verify's (variables so that tests can
// count the judgments the cache saves).
var (
	statusFast    = verify.StatusFast
	statusVouched = verify.StatusVouched
)

type freshEntry struct {
	// Names are the sidecar's entries, relative to it ("" is the sidecar
	// directory itself), sorted, each ending in a newline: one string,
	// which nearly every sidecar shares (decoded once per run, split
	// once per layout).
	Names string `json:"names"`
	// Digest covers the metadata of every name.
	Digest string `json:"digest"`
	// Source is a digest of the session file's metadata: while it is
	// unchanged, the walk takes the header's Version from here instead of
	// reading the header (discover.Headers).
	Source  string `json:"source"`
	Version int    `json:"version"`
	// SessionID, UID, GID, Entries and Bytes are what the verdict saw: the
	// header's id, the session file's owner, the manifest's counters
	// (verify.Vouched).
	SessionID string `json:"sessionId"`
	UID       uint32 `json:"uid"`
	GID       uint32 `json:"gid"`
	Entries   uint64 `json:"entries"`
	Bytes     uint64 `json:"bytes"`
	// Frames is set when every frame of the sidecar was checked when the
	// entry was made (a refresh in place: the old frames against their
	// rows, the new ones read back): while Digest matches, the next
	// refresh in place need not read them (framesVouched).
	Frames bool `json:"frames,omitempty"`
}

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

// joinNames is the Names of an entry.
func joinNames(names []string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	return b.String()
}

// layout splits an entry's Names (once per distinct value); ok is false
// for names that are not a sidecar's: too many, or one that could leave
// it (data in a user's tree, never an address elsewhere).
func (c *freshCache) layout(joined string) ([]string, bool) {
	c.layoutMu.Lock()
	defer c.layoutMu.Unlock()
	if names, ok := c.layouts[joined]; ok {
		return names, names != nil
	}
	names := strings.SplitAfter(joined, "\n")
	ok := len(names) > 1 && len(names) <= freshMaxNames+1 && names[len(names)-1] == ""
	if ok {
		names = names[:len(names)-1]
		for i, n := range names {
			n = strings.TrimSuffix(n, "\n")
			if n != "" && (!filepath.IsLocal(n) || n != filepath.Clean(n) || strings.Contains(n, "\n")) {
				ok = false
			}
			names[i] = n
		}
	}
	if !ok {
		names = nil
	}
	c.layouts[joined] = names
	return names, ok
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

// ctimeProbe starts the name of fineCtime's probe file in .pisess/.
const ctimeProbe = ".ctime-probe-"

// fineCtime reports whether the file system of dir gives a file a new
// change time at every change made after its times were read, however
// soon: three times over, a probe file written, its times read and
// written again must show two change times. A coarse clock (a tick of
// milliseconds) shows one; Linux's multigrain timestamps (6.13 and later,
// on ext4, xfs, btrfs and tmpfs) show two. Tests may replace it.
var fineCtime = func(dir string) (dev uint64, ok bool) {
	// A run killed while it probed left its probe: ours, removed.
	if old, err := filepath.Glob(filepath.Join(dir, ctimeProbe+"*")); err == nil {
		for _, p := range old {
			_ = os.Remove(p)
		}
	}
	f, err := os.CreateTemp(dir, ctimeProbe)
	if err != nil {
		return 0, false
	}
	defer os.Remove(f.Name())
	defer f.Close()
	ctime := func() (syscall.Stat_t, bool) {
		var st syscall.Stat_t
		if _, err := f.Write([]byte{0}); err != nil || syscall.Fstat(int(f.Fd()), &st) != nil {
			return st, false
		}
		return st, true
	}
	for range 3 {
		a, ok1 := ctime()
		b, ok2 := ctime()
		if !ok1 || !ok2 || durable.StatOfSys(&a).Ctime == durable.StatOfSys(&b).Ctime {
			return 0, false
		}
		dev = uint64(b.Dev)
	}
	return dev, true
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

// metaDigest hashes the lstat metadata of each name under the sidecar:
// identity, type and mode, links, owner, size and both times. racy is set
// when a time is later than racyWindow before now (a zero now skips that
// test). ok is false when a name cannot be lstat'ed.
func metaDigest(sidecar string, names []string, now time.Time) (digest string, racy, ok bool) {
	// The names are looked up from the sidecar directory (one path walk
	// instead of one per name: this is most of a no-op run's work).
	dir, err := unix.Open(sidecar, durable.LookupOnly|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false, false
	}
	defer unix.Close(dir)
	d, ok := digestNames(names, func(_ int, n string) (discover.FileKey, bool) {
		var st unix.Stat_t
		var err error
		if n == "" {
			err = unix.Fstat(dir, &st)
		} else {
			err = unix.Fstatat(dir, n, &st, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil {
			return discover.FileKey{}, false
		}
		k := discover.KeyOfUnix(&st)
		if !now.IsZero() && racyKey(k, now) {
			racy = true
		}
		return k, true
	})
	return d, racy, ok
}

// knownDigest is metaDigest from the metadata a verification just read of
// each name (keys), those of changed (written since) read again.
func knownDigest(sidecar string, names []string, keys []discover.FileKey, changed []string) (string, bool) {
	return digestNames(names, func(i int, n string) (discover.FileKey, bool) {
		if slices.Contains(changed, n) {
			return lstatKey(filepath.Join(sidecar, filepath.FromSlash(n)))
		}
		return keys[i], true
	})
}

// digestNames hashes each name with its metadata (key, which may fail:
// no digest then), the one digest of metaDigest and knownDigest.
func digestNames(names []string, key func(i int, name string) (discover.FileKey, bool)) (string, bool) {
	h := sha256.New()
	buf := make([]byte, 0, 8*11)
	for i, n := range names {
		k, ok := key(i, n)
		if !ok {
			return "", false
		}
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(k.AppendBinary(buf))
	}
	return hex.EncodeToString(h.Sum(nil)), true
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
