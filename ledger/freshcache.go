package ledger

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

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
//     (FineCtime: Linux's multigrain timestamps, 6.13 and later), so that
//     any later change shows.
//
// The cache is settled and saved only by a run that writes to the tree
// anyway: a run with nothing to do writes nothing (and pays nothing for
// the cache).
const FreshCacheName = "fresh.json"

// freshCacheMax bounds what is read of the cache (data in a user's tree:
// it only ever makes pisess skip a session whose files are unchanged).
const freshCacheMax = 32 << 20

// FreshMaxNames bounds the entries of one sidecar the cache follows: a
// sidecar with more (many segments) is judged every run.
const FreshMaxNames = 64

// FreshEntry is one session's entry.
type FreshEntry struct {
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

// JoinNames is the Names of an entry.
func JoinNames(names []string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	return b.String()
}

// ctimeProbe starts the name of fineCtime's probe file in .pisess/.
const ctimeProbe = ".ctime-probe-"

// FineCtime reports whether the file system of dir gives a file a new
// change time at every change made after its times were read, however
// soon: three times over, a probe file written, its times read and
// written again must show two change times. A coarse clock (a tick of
// milliseconds) shows one; Linux's multigrain timestamps (6.13 and later,
// on ext4, xfs, btrfs and tmpfs) show two.
func FineCtime(dir string) (dev uint64, ok bool) {
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
		dev = durable.StatOfSys(&b).Dev
	}
	return dev, true
}

// Layout splits an entry's Names (once per distinct value); ok is false
// for names that are not a sidecar's: too many, or one that could leave
// it (data in a user's tree, never an address elsewhere).
func (c *FreshCache) Layout(joined string) ([]string, bool) {
	c.layoutMu.Lock()
	defer c.layoutMu.Unlock()
	if names, ok := c.layouts[joined]; ok {
		return names, names != nil
	}
	names := strings.SplitAfter(joined, "\n")
	ok := len(names) > 1 && len(names) <= FreshMaxNames+1 && names[len(names)-1] == ""
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

// FreshCache is one tree's fresh cache, loaded once per run: its entries
// and their layouts. Whether an entry still holds is judged by the run
// (package engine), which reads the files it names.
type FreshCache struct {
	stateSet[FreshEntry]
	// layouts are the Names values met, split (nil: not valid).
	layoutMu sync.Mutex
	layouts  map[string][]string
}

// LoadFreshCache reads the tree's cache. A missing, unreadable or
// malformed cache is an empty one, and so is every entry that is not one
// this pisess writes.
func LoadFreshCache(tree string) *FreshCache {
	c := &FreshCache{layouts: map[string][]string{}}
	c.stateSet = loadStateSet(tree, FreshCacheName, freshCacheMax, func(e FreshEntry) bool {
		if len(e.Digest) != 2*sha256.Size || len(e.Source) != sha256.Size || e.Version <= 0 || !wire.ValidUUID(e.SessionID) {
			return false // also every entry of an earlier pisess, which had no source digest
		}
		_, ok := c.Layout(e.Names)
		return ok
	})
	return c
}

// Put records e for the session rel.
func (c *FreshCache) Put(rel string, e FreshEntry) {
	c.Set(rel, e, func(old, e FreshEntry) bool { return old == e })
}
