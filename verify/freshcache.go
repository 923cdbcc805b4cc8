package verify

import (
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/writers/wire"
)

// The fresh cache (ledger.FreshCache, whose doc says what it holds) as a
// run uses it: its entries stand in for the statuses of the planning while
// the files they name are as they were (MetaDigest), and the run
// adds the verdicts of its own statuses and the sidecars it wrote.

// FreshJudges are the checks behind the cache's verdicts; a test replaces
// them to count the judgments the cache saves.
type FreshJudges struct {
	// RacyWindow: a verdict on files changed this close to (or after)
	// the start of its judgment is not cached.
	RacyWindow time.Duration
	// StatusOpen and StatusVouched are the statuses (verify's own).
	StatusOpen    func(path string) (StatusReport, error)
	StatusVouched func(path string, v Vouched) (StatusReport, bool)
	// FineCtime probes a file system's change times (ledger.FineCtime).
	FineCtime func(dir string) (dev uint64, ok bool)
}

// DefaultFreshJudges are verify's, a racy window of 2 s and ledger's probe.
func DefaultFreshJudges() FreshJudges {
	return FreshJudges{RacyWindow: 2 * time.Second, StatusOpen: StatusOpen,
		StatusVouched: StatusVouched, FineCtime: ledger.FineCtime}
}

// OrDefault is j with the default's judge (DefaultFreshJudges) wherever j
// gives none (a nil function, a zero racy window): a test replaces only
// the judges it gives.
func (j FreshJudges) OrDefault() FreshJudges {
	d := DefaultFreshJudges()
	if j.RacyWindow != 0 {
		d.RacyWindow = j.RacyWindow
	}
	if j.StatusOpen != nil {
		d.StatusOpen = j.StatusOpen
	}
	if j.StatusVouched != nil {
		d.StatusVouched = j.StatusVouched
	}
	if j.FineCtime != nil {
		d.FineCtime = j.FineCtime
	}
	return d
}

// FreshCache is one tree's fresh cache, loaded once per run.
type FreshCache struct {
	*ledger.FreshCache
	judges FreshJudges
	// loaded is when the cache was read, before the run's walk: every
	// judgment of the run (headers read, statuses) came after it.
	loaded time.Time
	// candidates were judged fresh by this run's planning (Settle);
	// written are the sidecars this run wrote and verified, as read just
	// after (Vouch). Both under mu.
	mu         sync.Mutex
	candidates []candidate
	written    []writtenEntry
}

// candidate is a session a status of this run found fresh.
type candidate struct {
	s  discover.Session
	st StatusReport
}

// writtenEntry is the entry of a sidecar this run wrote, and the device of
// its files.
type writtenEntry struct {
	rel string
	dev uint64
	e   ledger.FreshEntry
}

// LoadFreshCache reads the tree's cache, to be judged by j.
func LoadFreshCache(tree string, j FreshJudges) *FreshCache {
	loaded := time.Now()
	return &FreshCache{FreshCache: ledger.LoadFreshCache(tree), judges: j, loaded: loaded}
}

// Header implements discover.Headers: the header version of a session
// judged fresh, while its file's metadata is what it was then.
func (c *FreshCache) Header(rel string, key discover.FileKey) (int, bool) {
	e, ok := c.Get(rel)
	if !ok {
		return 0, false
	}
	if d, _ := sessionDigest(filepath.Join(c.Tree(), rel), key); e.Source != d {
		return 0, false
	}
	return e.Version, true
}

// sidecarVouched returns s's entry when its sidecar's files are as the
// entry saw them.
func (c *FreshCache) sidecarVouched(s discover.Session) (ledger.FreshEntry, bool) {
	e, ok := c.Get(s.Rel)
	if !ok || s.Sidecar == "" {
		return ledger.FreshEntry{}, false
	}
	names, ok := c.Layout(e.Names)
	if !ok {
		return ledger.FreshEntry{}, false
	}
	d, _, ok := MetaDigest(s.Sidecar, names, time.Time{}, c.judges.RacyWindow)
	return e, ok && d == e.Digest
}

// FramesVouched reports whether session s's sidecar is, file for file,
// the one a refresh of this or an earlier run wrote and checked frame for
// frame (an entry with Frames, made where change times are fine): its
// frames need not be read again, nor its directories listed (names are its
// entries). The caller holds the store's locks.
func (c *FreshCache) FramesVouched(s discover.Session) (names []string, ok bool) {
	if c == nil || s.Rel == "" {
		return nil, false
	}
	e, ok := c.sidecarVouched(s)
	if !ok || !e.Frames {
		return nil, false
	}
	names, _ = c.Layout(e.Names)
	return names, true
}

// Status returns the sidecar's status: from the cache when an earlier
// run judged it fresh and nothing has changed since; from StatusVouched
// when only the session file changed; else from StatusOpen, as deep as
// pi's open (issue 34 §2: a shallower status let damage pass, and was
// cached). A fresh verdict of StatusOpen or StatusVouched makes the
// session a candidate for Settle; any other verdict of StatusOpen drops
// its entry. A nil cache always asks StatusOpen.
func (c *FreshCache) Status(s discover.Session) (StatusReport, error) {
	if c == nil {
		return StatusOpen(s.Path)
	}
	if s.Rel == "" {
		return c.judges.StatusOpen(s.Path)
	}
	if st, vouched, ok := c.vouched(s); ok {
		if !vouched && st.Class == ClassMigrated && len(st.Findings) == 0 {
			c.addCandidate(s, st)
		}
		return st, nil
	}
	st, err := c.judges.StatusOpen(s.Path)
	if err != nil || st.Class != ClassMigrated || len(st.Findings) > 0 {
		c.Forget(s.Rel)
		return st, err
	}
	c.addCandidate(s, st)
	return st, nil
}

// Vouched returns the status of s when the cache stands in for a status
// as deep as pi's open: its sidecar is, file for file, one such a status
// (or the run that wrote it) found sound, and the session file is as it
// was then (migrated) or only it is judged again (StatusVouched). ok is
// false otherwise; nothing is recorded (`pisess status` reads the cache
// and never writes it).
func (c *FreshCache) Vouched(s discover.Session) (StatusReport, bool) {
	if c == nil || s.Rel == "" {
		return StatusReport{}, false
	}
	st, _, ok := c.vouched(s)
	return st, ok
}

// vouched is Vouched; whole is set when the entry vouches for the session
// file too (nothing was judged).
func (c *FreshCache) vouched(s discover.Session) (st StatusReport, whole, ok bool) {
	e, ok := c.sidecarVouched(s)
	if !ok {
		return StatusReport{}, false, false
	}
	key := s.Key
	if key == (discover.FileKey{}) {
		key, _ = LstatKey(s.Path)
	}
	if d, _ := sessionDigest(s.Path, key); e.Source == d {
		return StatusReport{Session: s.Path, Sidecar: s.Sidecar, Class: ClassMigrated,
			SourceFormat: s.Format, Version: e.Version, HeaderID: e.SessionID, SourceBytes: s.Size,
			Entries: e.Entries, Bytes: e.Bytes}, true, true
	}
	// pi wrote the session (or changed its metadata): the sidecar is what
	// the entry saw, only the session is judged again.
	st, ok = c.judges.StatusVouched(s.Path, Vouched{HeaderID: e.SessionID, OwnerUID: e.UID, OwnerGID: e.GID,
		Entries: e.Entries, Bytes: e.Bytes, ReadID: s.HeaderID, ReadVersion: s.Version})
	return st, false, ok
}

func (c *FreshCache) addCandidate(s discover.Session, st StatusReport) {
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
// system shows every later change (ledger.FineCtime), and if the session file is
// still exactly the one fingerprinted. v gives the header's id and the
// manifest's counters (the owner is the session file's, read here); names
// are the sidecar's entries as its verification walked them, under the
// same locks (read again when missing).
func (c *FreshCache) Vouch(s discover.Session, fp wire.SourceFingerprint, v Vouched, names []string, seen SeenKeys) {
	if c == nil || s.Rel == "" || fp.FileIdentity == nil {
		return
	}
	sidecar := discover.SidecarPath(s.Path) // s.Sidecar is "" for a session migrated now
	if len(names) == 0 || len(names) > ledger.FreshMaxNames {
		var err error
		if names, err = SidecarNames(sidecar, ledger.FreshMaxNames); err != nil {
			return
		}
		seen.Keys = nil
	}
	var d string
	var ok bool
	if len(seen.Keys) == len(names) {
		d, ok = KnownDigest(sidecar, names, seen.Keys, seen.Changed)
	} else {
		d, _, ok = MetaDigest(sidecar, names, time.Time{}, c.judges.RacyWindow)
	}
	if !ok {
		return
	}
	key, ok := LstatKey(s.Path)
	id := fp.FileIdentity
	if !ok || key.Size != fp.ByteLength || key.Dev != id.Device || key.Ino != id.Inode ||
		int64(key.CtimeSec) != id.ChangeTimeSeconds || int64(key.CtimeNsec) != id.ChangeTimeNanoseconds {
		return // written since it was read: a status judges it next run
	}
	var st syscall.Stat_t
	if syscall.Lstat(sidecar, &st) != nil {
		return
	}
	e := ledger.FreshEntry{Names: ledger.JoinNames(names), Digest: d, Source: SourceDigest(key), Version: 3, SessionID: v.HeaderID,
		UID: uint32(key.UID), GID: uint32(key.GID), Entries: v.Entries, Bytes: v.Bytes, Frames: true}
	c.mu.Lock()
	c.written = append(c.written, writtenEntry{rel: s.Rel, dev: uint64(st.Dev), e: e})
	c.mu.Unlock()
}

// SeenKeys is what a verification saw of a sidecar's entries (the
// metadata of each name, Report.Keys) and which of them were
// written since: vouch reads only those again.
type SeenKeys struct {
	Keys    []discover.FileKey
	Changed []string
}

// settle caches the verdicts of the candidates and the sidecars this run
// wrote. A status's verdict holds for the files as they are now when none
// of them changed after its judgment began (the cache's loading, before
// the walk read the session's header): every change time and
// modification time is older than that by more than the racy window
// (git's racily-clean rule; the window covers a file clock that lags).
// Their metadata, sampled now, is the digest. A sidecar written by this
// run is cached on a file system with fine change times (ledger.FineCtime). Only
// a run that writes the cache settles (the planning of a run that then
// writes nothing pays nothing for the cache): for a tree pi uses, the next
// refresh.
func (c *FreshCache) Settle() {
	c.mu.Lock()
	candidates, written := c.candidates, c.written
	c.candidates, c.written = nil, nil
	c.mu.Unlock()
	for _, cd := range candidates {
		s := cd.s
		names, err := SidecarNames(s.Sidecar, ledger.FreshMaxNames)
		if err != nil {
			c.Forget(s.Rel)
			continue
		}
		key, ok := LstatKey(s.Path)
		source, wal := sessionDigest(s.Path, key)
		if !ok || RacyKey(key, c.loaded, c.judges.RacyWindow) || wal != (discover.FileKey{}) && RacyKey(wal, c.loaded, c.judges.RacyWindow) ||
			cd.st.Version <= 0 || !wire.ValidUUID(cd.st.HeaderID) {
			c.Forget(s.Rel)
			continue
		}
		d, racy, ok := MetaDigest(s.Sidecar, names, c.loaded, c.judges.RacyWindow)
		if !ok || racy {
			c.Forget(s.Rel)
			continue
		}
		c.Put(s.Rel, ledger.FreshEntry{Names: ledger.JoinNames(names), Digest: d, Source: source, Version: cd.st.Version,
			SessionID: cd.st.HeaderID, UID: uint32(key.UID), GID: uint32(key.GID), Entries: cd.st.Entries, Bytes: cd.st.Bytes})
	}
	if len(written) == 0 {
		return
	}
	dev, fine := c.judges.FineCtime(filepath.Join(c.Tree(), discover.PisessDir))
	for _, w := range written {
		if fine && w.dev == dev && wire.ValidUUID(w.e.SessionID) {
			c.Put(w.rel, w.e)
		} else {
			c.Forget(w.rel)
		}
	}
}
