package ledger

import (
	"os"
	"syscall"

	"pisess/writers/durable"
)

// RefusalCacheName is the refusal cache in a tree's .pisess/: the sessions
// the reference's model refused, each with the file identity it had when
// it was read. A session whose identity is unchanged is refused again from
// the cache without being read, locked or journaled (issue 12, item 4): a
// cron run over a tree with refused sessions then does nothing for them
// until pi writes them again.
const RefusalCacheName = "refused.json"

// refusalCacheMax bounds what is read of the cache: it sits in a user's
// tree and is data, never trusted beyond what it says about a file whose
// identity still matches.
const refusalCacheMax = 16 << 20

// FileIdentity is what must be unchanged for a cached refusal to stand:
// any write to the file changes its size or times, a replacement its
// inode. ctime is included because mtime can be set back by a writer.
type FileIdentity struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtimeNs"`
	CtimeNs int64  `json:"ctimeNs"`
}

// IdentityOf lstats path: the identity of a regular file; ok is false for
// anything else, or when it cannot be taken.
func IdentityOf(path string) (FileIdentity, bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return FileIdentity{}, false
	}
	st, ok := durable.StatOf(fi)
	if !ok || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return FileIdentity{}, false
	}
	return FileIdentity{Dev: st.Dev, Ino: st.Ino, Size: st.Size,
		MtimeNs: st.Mtime.Sec*1e9 + st.Mtime.Nsec, CtimeNs: st.Ctime.Sec*1e9 + st.Ctime.Nsec}, true
}

// CachedRefusal is one session's entry: the identity its file had when it
// was read, and the reader's refusal (a readers.Class, its line, why).
type CachedRefusal struct {
	Identity FileIdentity `json:"identity"`
	Class    string       `json:"class"`
	Line     int64        `json:"line,omitempty"`
	Reason   string       `json:"reason"`
}

// RefusalCache is one tree's refusal cache, loaded once per run.
type RefusalCache struct {
	stateSet[CachedRefusal]
	verdict func(class string) bool
}

// LoadRefusalCache reads the tree's cache. A missing, unreadable or
// malformed cache is an empty one: it only saves work, so losing it costs
// one re-read of each refused session.
//
// The cache holds only the reference's verdicts about a session's bytes,
// those that any machine reading the same file would give: verdict says
// which classes (readers.Class) are (the caller's rule: ledger does not
// read sessions). An entry of another class — an I/O error, a lock, as
// older runs cached them (issue 32 §2) — is ignored, dropped from the file
// at the next save, and never remembered.
func LoadRefusalCache(tree string, verdict func(class string) bool) *RefusalCache {
	return &RefusalCache{loadStateSet(tree, RefusalCacheName, refusalCacheMax,
		func(e CachedRefusal) bool { return e.Reason != "" && verdict(e.Class) }), verdict}
}

// Lookup returns the cached refusal of the session rel when its file still
// has the identity id.
func (c *RefusalCache) Lookup(rel string, id FileIdentity) (CachedRefusal, bool) {
	e, ok := c.Get(rel)
	if !ok || e.Identity != id {
		return CachedRefusal{}, false
	}
	return e, true
}

// Remember records a refusal of session rel read at identity id; a
// refusal whose class is no verdict is not remembered.
func (c *RefusalCache) Remember(rel string, id FileIdentity, class string, line int64, reason string) {
	if !c.verdict(class) {
		return
	}
	c.Set(rel, CachedRefusal{Identity: id, Class: class, Line: line, Reason: reason},
		func(old, e CachedRefusal) bool { return old == e })
}
