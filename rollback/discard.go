package rollback

import (
	"context"
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

// fpBeforeDiscards: a batch of discarded notes synced, its copies not yet
// removed. (Named for the migrate run whose displaced sidecars these are.)
var fpBeforeDiscards = durable.Register("engine.before-discards")

// DiscardedNote is what a report says of a displaced sidecar not kept.
const DiscardedNote = "the displaced sidecar was reproducible from the source and was not kept (rollback of this run leaves pi reading the session file)"

// Displaced is a session of a run whose refresh may have displaced a
// sidecar into the quarantine: what the discarder judges it by.
type Displaced struct {
	// Journal is the session's tree journal (nil: the run keeps none).
	Journal *ledger.Journal
	// Tree, Rel and Session are the session's tree, its path in the tree
	// and the session file; Sidecar is its sidecar.
	Tree, Rel, Session, Sidecar string
	// Class is the status class the run planned the session with: that
	// of the sidecar it displaced.
	Class verify.Class
	// Installed: the run installed a new sidecar; Path is where the
	// displaced one went ("" when none).
	Installed bool
	Path      string
	// Prior is the session's refresh record as the run found it (valid
	// when HasPrior).
	Prior    ledger.RefreshRecord
	HasPrior bool
	// Database: the session is a SQLite database, which a writer rewrites
	// in place, so the displaced sidecar is judged by its entries instead
	// of the source's first bytes: reproducible when it is of HeaderID and
	// holds PrefixEntries entries whose chain is PrefixChain, the new
	// build's chain after as many (writers.StageResult.PrefixChain).
	Database      bool
	HeaderID      string
	PrefixEntries uint64
	PrefixChain   string
}

// reproducibleDisplaced returns where the displaced sidecar of a refresh is
// when it is reproducible (ok), so that the discarder removes it.
func reproducibleDisplaced(known func() map[string]bool, d Displaced, cid string) (q string, ok bool, err error) {
	if d.Journal == nil || !d.Installed || d.Path == "" {
		return "", false, nil
	}
	if d.Class != verify.ClassStale && d.Class != verify.ClassMigrated {
		return "", false, nil // corrupt, partial, a symlink, unreadable: kept
	}
	q = filepath.Clean(d.Path)
	if q != ledger.QuarantinePath(d.Tree, cid, d.Rel, "displaced") {
		return "", false, nil // not where this run's cutover puts it: not ours to judge
	}
	// Parents resolved without symlinks: a planted symlink on the way to
	// the quarantine must not turn this removal into one outside the tree.
	st, err := durable.Lstat(q)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", false, nil
	}
	about := recordAbout(q, d)
	if ok, err := builtByPisess(q, d, about, known); err != nil || !ok {
		return "", false, err
	}
	if d.Database {
		if !prefixOfBuild(q, d) {
			return "", false, nil
		}
		return q, true, nil
	}
	if ok, err := sourceStillHolds(q, d, about); err != nil || !ok {
		return "", false, err
	}
	return q, true, nil
}

// prefixOfBuild reports whether the displaced store q is a prefix of the
// store the run built from the database (issue 34 §3: every refresh of a
// SQLite session kept its displaced sidecar, the database never starting
// with the bytes it was built from): the same session id, and a manifest
// whose entry count and chain are the new build's after as many entries.
// The chain covers every payload byte of those entries.
func prefixOfBuild(q string, d Displaced) bool {
	if d.PrefixEntries == 0 || d.PrefixChain == "" || d.HeaderID == "" {
		return false
	}
	st, err := store.Open(q, store.ReadOptions{OnceManifest: true})
	if err != nil {
		return false
	}
	m, err := st.Manifest()
	return err == nil && m.SessionID == d.HeaderID && m.Counters.EntriesTotal == d.PrefixEntries && m.Integrity.ChainHash == d.PrefixChain
}

// Discard is one displaced sidecar a run does not keep.
type Discard struct {
	Job  int    // the number the run offered it with (Offer)
	Path string // where it was in the quarantine
	j    *ledger.Journal
}

// Discarder removes the displaced sidecars a run does not keep while the
// run goes on (issue 14: removing them after the last session left the
// unlinks of every refreshed store, most of a steady refresh run's tail,
// in series at its end). A session's discarded note is appended to its
// journal as the session finishes; the discarder makes the notes queued so
// far durable with one sync per journal, then removes their copies (a crash
// between the two leaves an extra copy, never a missing one unrecorded),
// and meanwhile the notes of the next sessions queue up.
type Discarder struct {
	ctx context.Context
	cid string
	now func() string
	in  chan Discard
	out chan DiscardResults

	mu    sync.Mutex
	known map[*ledger.Journal]map[string]bool
}

// DiscardResults are the discards done and, per failure, why the copy was
// kept, by the number it was offered with.
type DiscardResults struct {
	Done []Discard
	Kept map[int]error
}

// NewDiscarder starts the discarder of run cid, whose notes are stamped
// with now's time. Once ctx is done it discards nothing more (issue 34 §4:
// an interrupt went on removing every copy queued): a copy whose note is
// written stays, as after a crash between the two (prune removes it with
// its run), and one not offered yet is kept like any displaced sidecar.
func NewDiscarder(ctx context.Context, cid string, now func() string) *Discarder {
	d := &Discarder{ctx: ctx, cid: cid, now: now, in: make(chan Discard, 64), out: make(chan DiscardResults, 1),
		known: map[*ledger.Journal]map[string]bool{}}
	go d.run()
	return d
}

// Offer queues the displaced sidecar of a finished session (number i of
// the run) for removal when it is reproducible; the error says why it was
// kept otherwise (nil when there is nothing to say).
func (d *Discarder) Offer(i int, x Displaced) error {
	if d.ctx.Err() != nil {
		return nil
	}
	q, ok, err := reproducibleDisplaced(func() map[string]bool { return d.knownIDs(x.Journal) }, x, d.cid)
	if err != nil || !ok {
		return err
	}
	err = x.Journal.AppendUnsynced(ledger.NoteRecord(ledger.Note{CorrelationID: d.cid, At: d.now(), Session: x.Session,
		Kind: ledger.NoteDiscarded, Path: x.Sidecar, QuarantinePath: q,
		Detail: "the displaced sidecar was built by pisess and the session file still holds the bytes it was built from: not kept"}))
	if err != nil {
		return fmt.Errorf("journal discarded note: %w", err)
	}
	d.in <- Discard{Job: i, Path: q, j: x.Journal}
	return nil
}

// knownIDs returns the correlation ids j records, read once per run and
// only when a refresh record cannot vouch for a store.
func (d *Discarder) knownIDs(j *ledger.Journal) map[string]bool {
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

// Wait returns the results once every offered discard is done.
func (d *Discarder) Wait() DiscardResults {
	close(d.in)
	return <-d.out
}

func (d *Discarder) run() {
	res := DiscardResults{Kept: map[int]error{}}
	for first := range d.in {
		batch := []Discard{first}
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
			if d.ctx.Err() != nil {
				break // interrupted: the copies stay (see NewDiscarder)
			}
			if err := synced[x.j]; err != nil {
				res.Kept[x.Job] = fmt.Errorf("journal discarded note: %w", err)
				continue
			}
			// Not synced: a removal a crash undoes leaves a copy the
			// journal calls discarded, which prune removes with its run.
			// By descriptor, the quarantine's path opened without a
			// symlink: a parent the tree's owner swapped for one after
			// reproducibleDisplaced looked is never followed (issue 32 §4).
			if err := durable.OS.RemoveAll(x.Path); err != nil {
				res.Kept[x.Job] = fmt.Errorf("remove reproducible displaced sidecar %s: %w", x.Path, err)
				continue
			}
			res.Done = append(res.Done, x)
		}
	}
	d.out <- res
}

// builtByPisess reports whether the store's own ledger ends with a
// completed event of a pisess run: the run the refresh record names, when
// the record is about this very store (about), else one the tree journal
// knows (known reads it, once per run and only when a record cannot
// answer: the journal grows with every run, and prune drops old runs).
func builtByPisess(store string, d Displaced, about bool, known func() map[string]bool) (bool, error) {
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
			if d.Prior.CorrelationID != "" && cid == d.Prior.CorrelationID && about {
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
// (about). (A refresh that proved the source begins with the record's
// bytes continued the sidecar in place: it displaced nothing.)
func sourceStillHolds(q string, d Displaced, about bool) (bool, error) {
	bytes, sum, ok := builtFrom(q, d, about)
	if !ok {
		return false, nil
	}
	src, err := durable.OS.OpenNoFollow(d.Session, os.O_RDONLY, 0)
	if err != nil {
		return false, fmt.Errorf("reread %s: %w", d.Session, err)
	}
	defer src.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(src, bytes))
	if err != nil {
		return false, fmt.Errorf("reread %s: %w", d.Session, err)
	}
	return n == bytes && hex.EncodeToString(h.Sum(nil)) == sum, nil
}

// builtFrom returns the length and lower-case SHA-256 of the source bytes
// the store q was built from, as its fingerprint or the run's prior
// refresh record says (about: the record describes q).
func builtFrom(q string, d Displaced, about bool) (int64, string, bool) {
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
	return d.Prior.SourceBytes, d.Prior.SourceSHA256, true
}

// recordAbout reports whether the run's prior refresh record describes the
// store q: a well-formed record, q's manifest the very file it names (same
// device and inode), with the entry count and chain hash it names.
func recordAbout(q string, d Displaced) bool {
	if !d.HasPrior {
		return false
	}
	if _, ok := d.Prior.SHA256(); !ok {
		return false
	}
	dev, ino, ok := store.ManifestIdentity(q)
	if !ok || dev != d.Prior.ManifestDev || ino != d.Prior.ManifestIno {
		return false
	}
	st, err := store.Open(q, store.ReadOptions{})
	if err != nil {
		return false
	}
	m, err := st.Manifest()
	return err == nil && m.Counters.EntriesTotal == d.Prior.Entries && m.Integrity.ChainHash == d.Prior.ChainHash
}

// RemoveEmptyParents removes dir and its parents up to and including stop
// while they are empty (rmdir refuses a directory that is not), never
// through a symlink (durable.Ops.RemoveDir).
func RemoveEmptyParents(dir, stop string) {
	for strings.HasPrefix(dir, stop) {
		if durable.OS.RemoveDir(dir) != nil || dir == stop {
			return
		}
		dir = filepath.Dir(dir)
	}
}
