package engine

import (
	"os"

	"pisess/readers"
	"pisess/readers/discover"
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

// fileIdentity is what must be unchanged for a cached refusal to stand:
// any write to the file changes its size or times, a replacement its
// inode. ctime is included because mtime can be set back by a writer.
type fileIdentity struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtimeNs"`
	CtimeNs int64  `json:"ctimeNs"`
}

// identityOf lstats path; ok is false when it cannot be taken.
func identityOf(path string) (fileIdentity, bool) {
	if fi, err := os.Lstat(path); err == nil {
		if k, ok := discover.FileKeyOf(fi); ok {
			return identityOfKey(k)
		}
	}
	return fileIdentity{}, false
}

type cachedRefusal struct {
	Identity fileIdentity  `json:"identity"`
	Class    readers.Class `json:"class"`
	Line     int64         `json:"line,omitempty"`
	Reason   string        `json:"reason"`
}

// refusalCache is one tree's refusal cache, loaded once per run.
type refusalCache struct {
	stateSet[cachedRefusal]
}

// loadRefusalCache reads the tree's cache. A missing, unreadable or
// malformed cache is an empty one: it only saves work, so losing it costs
// one re-read of each refused session.
func loadRefusalCache(tree string) *refusalCache {
	return &refusalCache{loadStateSet(tree, RefusalCacheName, refusalCacheMax,
		func(e cachedRefusal) bool { return e.Reason != "" })}
}

// lookup returns the cached refusal of the session rel when its file still
// has the identity id.
func (c *refusalCache) lookup(rel string, id fileIdentity) (cachedRefusal, bool) {
	e, ok := c.get(rel)
	if !ok || e.Identity != id {
		return cachedRefusal{}, false
	}
	return e, true
}

// remember records a refusal of session rel read at identity id.
func (c *refusalCache) remember(rel string, id fileIdentity, r *readers.RefusedError) {
	c.set(rel, cachedRefusal{Identity: id, Class: r.Class, Line: r.Line, Reason: r.Reason},
		func(old, e cachedRefusal) bool { return old == e })
}
