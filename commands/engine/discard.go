package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"pisess/ledger"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// Bounded disk (issue 12, item 7): a cron refresh every 15 minutes of a
// busy session would otherwise keep one full copy of its old sidecar per
// run. A displaced sidecar is not kept when it is reproducible: pisess
// built it (its own ledger's completed event carries a correlation id this
// tree's journal knows) and the session file still begins with exactly the
// bytes it was built from (pi only appends). Anything else — a sidecar
// pisess did not build, a corrupt one, a source rewritten rather than
// appended to — stays in the quarantine.

// discardedNote is what a report says of a displaced sidecar not kept.
const discardedNote = "the displaced sidecar was reproducible from the source and was not kept (rollback of this run leaves pi reading the session file)"

// reproducibleDisplaced returns where the displaced sidecar of a refresh is
// when it is reproducible (ok), so that the discarder removes it.
func reproducibleDisplaced(known func() map[string]bool, jb job, res SessionResult, cid string) (q string, ok bool, err error) {
	if jb.journal == nil || res.Outcome != OutcomeDone || res.Displaced == "" {
		return "", false, nil
	}
	if jb.plan.class != verify.ClassStale && jb.plan.class != verify.ClassMigrated {
		return "", false, nil // corrupt, partial, a symlink, unreadable: kept
	}
	q = filepath.Clean(res.Displaced)
	if q != ledger.QuarantinePath(jb.session.Tree, cid, jb.session.Rel, "displaced") {
		return "", false, nil // not where this run's cutover puts it: not ours to judge
	}
	// Parents resolved without symlinks: a planted symlink on the way to
	// the quarantine must not turn this removal into one outside the tree.
	st, err := durable.Lstat(q)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", false, nil
	}
	about := recordAbout(q, jb)
	if ok, err := builtByPisess(q, jb, about, known); err != nil || !ok {
		return "", false, err
	}
	if ok, err := sourceStillHolds(q, jb, about, res.Incremental); err != nil || !ok {
		return "", false, err
	}
	return q, true, nil
}

// discard is one displaced sidecar a run does not keep.
type discard struct {
	job int // index in the run's jobs and sessions
	q   string
	j   *ledger.Journal
}

// discarder removes the displaced sidecars a run does not keep while the
// run goes on (issue 14: removing them after the last session left the
// unlinks of every refreshed store, most of a steady refresh run's tail,
// in series at its end). A session's discarded note is appended to its
// journal as the session finishes; the discarder makes the notes queued so
// far durable with one sync per journal, then removes their copies (a crash
// between the two leaves an extra copy, never a missing one unrecorded),
// and meanwhile the notes of the next sessions queue up.
type discarder struct {
	cid string
	now func() string
	in  chan discard
	out chan discardResults

	mu    sync.Mutex
	known map[*ledger.Journal]map[string]bool
}

// discardResults are the discards done and, per failure, why the copy was
// kept, by job index.
type discardResults struct {
	done []discard
	kept map[int]error
}

func newDiscarder(cid string, now func() string) *discarder {
	d := &discarder{cid: cid, now: now, in: make(chan discard, 64), out: make(chan discardResults, 1),
		known: map[*ledger.Journal]map[string]bool{}}
	go d.run()
	return d
}

// offer queues the displaced sidecar of a finished session for removal
// when it is reproducible; the error says why it was kept otherwise (nil
// when there is nothing to say).
func (d *discarder) offer(i int, jb job, res SessionResult) error {
	q, ok, err := reproducibleDisplaced(func() map[string]bool { return d.knownIDs(jb.journal) }, jb, res, d.cid)
	if err != nil || !ok {
		return err
	}
	err = jb.journal.AppendUnsynced(ledger.NoteRecord(ledger.Note{CorrelationID: d.cid, At: d.now(), Session: res.Path,
		Kind: ledger.NoteDiscarded, Path: res.Sidecar, QuarantinePath: q,
		Detail: "the displaced sidecar was built by pisess and the session file still holds the bytes it was built from: not kept"}))
	if err != nil {
		return fmt.Errorf("journal discarded note: %w", err)
	}
	d.in <- discard{job: i, q: q, j: jb.journal}
	return nil
}

// knownIDs returns the correlation ids j records, read once per run and
// only when a refresh record cannot vouch for a store.
func (d *discarder) knownIDs(j *ledger.Journal) map[string]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.known[j] == nil {
		d.known[j] = map[string]bool{}
		if ids, err := j.CorrelationIDs(); err == nil {
			for _, id := range ids {
				d.known[j][id] = true
			}
		}
	}
	return d.known[j]
}

// wait returns the results once every offered discard is done.
func (d *discarder) wait() discardResults {
	close(d.in)
	return <-d.out
}

func (d *discarder) run() {
	res := discardResults{kept: map[int]error{}}
	for first := range d.in {
		batch := []discard{first}
	gather:
		for {
			select {
			case x, ok := <-d.in:
				if !ok {
					break gather
				}
				batch = append(batch, x)
			default:
				break gather
			}
		}
		synced := map[*ledger.Journal]error{}
		for _, x := range batch {
			if _, ok := synced[x.j]; !ok {
				synced[x.j] = x.j.Sync()
			}
		}
		durable.Failpoint(fpBeforeDiscards)
		for _, x := range batch {
			if err := synced[x.j]; err != nil {
				res.kept[x.job] = fmt.Errorf("journal discarded note: %w", err)
				continue
			}
			// Not synced: a removal a crash undoes leaves a copy the
			// journal calls discarded, which prune removes with its run.
			if err := os.RemoveAll(x.q); err != nil {
				res.kept[x.job] = fmt.Errorf("remove reproducible displaced sidecar %s: %w", x.q, err)
				continue
			}
			res.done = append(res.done, x)
		}
	}
	d.out <- res
}

// builtByPisess reports whether the store's own ledger ends with a
// completed event of a pisess run: the run the refresh record names, when
// the record is about this very store (about), else one the tree journal
// knows (known reads it, once per run and only when a record cannot
// answer: the journal grows with every run, and prune drops old runs).
func builtByPisess(store string, jb job, about bool, known func() map[string]bool) (bool, error) {
	evs, err := ledger.ReadStoreEvents(store)
	if err != nil {
		var le *ledger.LedgerError
		if errors.As(err, &le) {
			return false, nil // damaged: not reproducible evidence
		}
		return false, err
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Phase == wire.PhaseCompleted && evs[i].Outcome == wire.OutcomeOK {
			cid := evs[i].CorrelationID
			if jb.prior.CorrelationID != "" && cid == jb.prior.CorrelationID && about {
				return true, nil
			}
			return known()[cid], nil
		}
	}
	return false, nil
}

// sourceStillHolds reports whether the session file begins with the bytes
// the displaced store q was built from (length and SHA-256). Its
// source-state fingerprint says which, unless pi marked it dirty (which
// drops the fingerprint, FORMAT.md §8: the everyday case); then the
// refresh record the run found says it, when the record is about q
// (about). An incremental refresh has already proved that the source
// begins with the record's bytes: those are not hashed again.
func sourceStillHolds(q string, jb job, about, incremental bool) (bool, error) {
	bytes, sum, ok := builtFrom(q, jb, about)
	if !ok {
		return false, nil
	}
	if incremental && jb.hasPrior && jb.prior.SourceBytes == bytes && jb.prior.SourceSHA256 == sum {
		return true, nil
	}
	src, err := durable.OS.OpenNoFollow(jb.session.Path, os.O_RDONLY, 0)
	if err != nil {
		return false, fmt.Errorf("reread %s: %w", jb.session.Path, err)
	}
	defer src.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(src, bytes))
	if err != nil {
		return false, fmt.Errorf("reread %s: %w", jb.session.Path, err)
	}
	return n == bytes && hex.EncodeToString(h.Sum(nil)) == sum, nil
}

// builtFrom returns the length and lower-case SHA-256 of the source bytes
// the store q was built from, as its fingerprint or the run's prior
// refresh record says (about: the record describes q).
func builtFrom(q string, jb job, about bool) (int64, string, bool) {
	f, err := durable.OS.OpenNoFollow(filepath.Join(q, "source-state.json"), os.O_RDONLY, 0)
	if err != nil {
		return 0, "", false
	}
	b, err := io.ReadAll(io.LimitReader(f, wire.MaxSourceStateBytes+1))
	f.Close()
	if err != nil {
		return 0, "", false
	}
	st, err := wire.ParseSourceState(b)
	if err != nil {
		return 0, "", false
	}
	if fp := st.SourceFingerprint; fp != nil {
		return int64(fp.ByteLength), strings.ToLower(fp.SHA256), fp.ByteLength <= 1<<62
	}
	if !about {
		return 0, "", false
	}
	return jb.prior.SourceBytes, jb.prior.SourceSHA256, true
}

// recordAbout reports whether the run's prior refresh record describes the
// store q: a well-formed record, q's manifest the very file it names (same
// device and inode), with the entry count and chain hash it names.
func recordAbout(q string, jb job) bool {
	if !jb.hasPrior {
		return false
	}
	if _, ok := jb.prior.SHA256(); !ok {
		return false
	}
	dev, ino, ok := manifestIdentity(q)
	if !ok || dev != jb.prior.ManifestDev || ino != jb.prior.ManifestIno {
		return false
	}
	st, err := store.Open(q, store.ReadOptions{})
	if err != nil {
		return false
	}
	m, err := st.Manifest()
	return err == nil && m.Counters.EntriesTotal == jb.prior.Entries && m.Integrity.ChainHash == jb.prior.ChainHash
}

// removeEmptyParents removes dir and its parents up to and including stop
// while they are empty (os.Remove refuses a directory that is not).
func removeEmptyParents(dir, stop string) {
	for strings.HasPrefix(dir, stop) {
		if os.Remove(dir) != nil || dir == stop {
			return
		}
		dir = filepath.Dir(dir)
	}
}
