package engine

import (

	// The state files are read and written by every run; this drop-in
	// for encoding/json decodes them several times faster (issue 14: a
	// megabyte for a tree of 2,000 sessions, before the walk can end).

	"pisess/readers"
	"pisess/readers/discover"
	"syscall"
)

// loading is a value read on a goroutine of its own; get waits for it.
type loading[T any] struct {
	ready chan struct{}
	v     T
}

func startLoading[T any](load func() T) *loading[T] {
	l := &loading[T]{ready: make(chan struct{})}
	go func() {
		l.v = load()
		close(l.ready)
	}()
	return l
}

func (l *loading[T]) get() T {
	<-l.ready
	return l.v
}

// treeCaches are a tree's state files, being read.
type treeCaches struct {
	refusals *loading[*refusalCache]
	fresh    *loading[*freshCache]
	records  *loading[*refreshRecords]
}

func loadTreeCaches(root string) *treeCaches {
	return &treeCaches{
		refusals: startLoading(func() *refusalCache { return loadRefusalCache(root) }),
		fresh:    startLoading(func() *freshCache { return loadFreshCache(root) }),
		records:  startLoading(func() *refreshRecords { return loadRefreshRecords(root) }),
	}
}

// Header implements discover.Headers from the fresh cache, once read.
func (c *treeCaches) Header(rel string, key discover.FileKey) (int, bool) {
	return c.fresh.get().Header(rel, key)
}

// identityOfKey is the identity of a regular file by its lstat metadata
// (discovery's, taken as it listed the file: before anything read it).
func identityOfKey(k discover.FileKey) (fileIdentity, bool) {
	if k == (discover.FileKey{}) || k.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fileIdentity{}, false
	}
	return fileIdentity{Dev: k.Dev, Ino: k.Ino, Size: int64(k.Size),
		MtimeNs: int64(k.MtimeSec)*1e9 + int64(k.MtimeNsec), CtimeNs: int64(k.CtimeSec)*1e9 + int64(k.CtimeNsec)}, true
}

// planWithCache plans jb's session, first asking the tree's refusal cache
// (jb.cache): a session refused before and unchanged since is refused
// again without being read, locked or journaled (issue 12, item 4). The
// tree's fresh cache (jb.fresh) stands in for the sidecar's status when
// it can (planSession).
func planWithCache(jb *job, force bool) {
	s := jb.session
	if jb.cache != nil && s.Refusal == nil {
		if jb.identity, jb.hasIdentity = identityOfKey(s.Key); !jb.hasIdentity {
			jb.identity, jb.hasIdentity = identityOf(s.Path)
		}
		if jb.hasIdentity {
			if e, ok := jb.cache.lookup(s.Rel, jb.identity); ok {
				jb.fromCache = true
				jb.plan = plan{action: PlanRefuse, reason: e.Reason,
					refusal: &readers.RefusedError{Path: s.Path, Line: e.Line, Class: e.Class, Reason: e.Reason},
					notes:   []string{"refused before and unchanged since (" + RefusalCacheName + "): not read again until pi writes it"}}
				return
			}
		}
	}
	jb.plan = planSession(s, force, jb.fresh)
}

// record updates the cache with a session's outcome: a refusal found by
// reading the session is remembered with the identity taken before the
// read (a write during the read changes it, so the session is read again);
// a session installed is forgotten.
func (c *refusalCache) record(jb job, res SessionResult) {
	switch {
	case jb.fromCache || !jb.hasIdentity || jb.session.Rel == "":
	case res.Outcome == OutcomeRefused && jb.plan.action != PlanRefuse && res.Error != nil:
		c.remember(jb.session.Rel, jb.identity, &readers.RefusedError{Path: jb.session.Path,
			Line: res.Error.Line, Class: readers.Class(res.Error.Class), Reason: res.Reason})
	case res.Outcome == OutcomeDone || res.Outcome == OutcomeSkipped:
		c.forget(jb.session.Rel)
	}
}
