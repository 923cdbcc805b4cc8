package engine

import (
	"sync"
	"syscall"

	"pisess/ledger"
	"pisess/readers"
	"pisess/readers/discover"
	"pisess/verify"
)

// A run reads each tree's state files (ledger: the refusal cache, the
// fresh cache, the refresh records) on goroutines of their own while the
// walk lists the tree, and plans with them.

// loading starts load on a goroutine of its own and returns a function
// that waits for its value.
func loading[T any](load func() T) func() T {
	c := make(chan T, 1)
	go func() { c <- load() }()
	return sync.OnceValue(func() T { return <-c })
}

// treeCaches are a tree's state files, being read.
type treeCaches struct {
	refusals func() *ledger.RefusalCache
	fresh    func() *verify.FreshCache
	records  func() *ledger.RefreshRecords
}

func loadTreeCaches(root string, j verify.FreshJudges) *treeCaches {
	return &treeCaches{
		refusals: loading(func() *ledger.RefusalCache { return ledger.LoadRefusalCache(root, isVerdict) }),
		fresh:    loading(func() *verify.FreshCache { return verify.LoadFreshCache(root, j) }),
		records:  loading(func() *ledger.RefreshRecords { return ledger.LoadRefreshRecords(root) }),
	}
}

// Header implements discover.Headers from the fresh cache, once read.
func (c *treeCaches) Header(rel string, key discover.FileKey) (int, bool) {
	return c.fresh().Header(rel, key)
}

// identityOfKey is the identity of a regular file by its lstat metadata
// (discovery's, taken as it listed the file: before anything read it).
func identityOfKey(k discover.FileKey) (ledger.FileIdentity, bool) {
	if k == (discover.FileKey{}) || k.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return ledger.FileIdentity{}, false
	}
	return ledger.FileIdentity{Dev: k.Dev, Ino: k.Ino, Size: int64(k.Size),
		MtimeNs: int64(k.MtimeSec)*1e9 + int64(k.MtimeNsec), CtimeNs: int64(k.CtimeSec)*1e9 + int64(k.CtimeNsec)}, true
}

// planWithCache plans jb's session, first asking the tree's refusal cache:
// a session refused before and unchanged since is refused again without
// being read, locked or journaled (issue 12, item 4).
func planWithCache(jb *job, force bool) {
	s := jb.session
	if jb.cache != nil && s.Refusal == nil {
		if jb.identity, jb.hasIdentity = identityOfKey(s.Key); !jb.hasIdentity {
			jb.identity, jb.hasIdentity = ledger.IdentityOf(s.Path)
		}
		if jb.hasIdentity {
			if e, ok := jb.cache.Lookup(s.Rel, jb.identity); ok {
				jb.fromCache = true
				jb.plan = plan{action: PlanRefuse, reason: e.Reason,
					refusal: &readers.RefusedError{Path: s.Path, Line: e.Line, Class: readers.Class(e.Class), Reason: e.Reason},
					notes:   []string{"refused before and unchanged since (" + ledger.RefusalCacheName + "): not read again until pi writes it"}}
				return
			}
		}
	}
	jb.plan = planSession(s, force, jb.fresh)
}

// isVerdict: the refusal cache holds the reference's verdicts on a
// session's bytes, never an error of one run (readers.Class.Transient).
func isVerdict(class string) bool { return !readers.Class(class).Transient() }

// recordRefusal remembers a refusal found by reading the session, with
// the identity taken before the read (a write meanwhile changes it), and
// forgets a session installed.
func recordRefusal(c *ledger.RefusalCache, jb job, res SessionResult) {
	switch {
	case jb.fromCache || !jb.hasIdentity || jb.session.Rel == "":
	case res.Outcome == OutcomeRefused && jb.plan.action != PlanRefuse && res.Error != nil && isVerdict(res.Error.Class):
		c.Remember(jb.session.Rel, jb.identity, res.Error.Class, res.Error.Line, res.Reason)
	case res.Outcome == OutcomeDone || res.Outcome == OutcomeSkipped:
		c.Forget(jb.session.Rel)
	}
}
