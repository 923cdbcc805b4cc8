package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"io"
	"os"
	"path/filepath"
	"strings"

	"pisess/ledger"
	"pisess/verify"
	"pisess/writers/durable"
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

// discardReproducible removes the displaced sidecar of a refresh when it
// is reproducible, after journaling a discarded note (so a crash between
// the two leaves an extra copy, never a missing one unrecorded). It
// returns a note for the report, "" when the copy is kept.
func discardReproducible(ops durable.Ops, j *ledger.Journal, known map[string]bool, jb job, res SessionResult, cid string, now string) (string, error) {
	if j == nil || res.Outcome != OutcomeDone || res.Displaced == "" {
		return "", nil
	}
	if jb.plan.class != verify.ClassStale && jb.plan.class != verify.ClassMigrated {
		return "", nil // corrupt, partial, a symlink, unreadable: kept
	}
	tree := jb.session.Tree
	q := filepath.Clean(res.Displaced)
	want := ledger.QuarantinePath(tree, cid, jb.session.Rel, "displaced")
	if q != want {
		return "", nil // not where this run's cutover puts it: not ours to judge
	}
	// Parents resolved without symlinks: a planted symlink on the way to
	// the quarantine must not turn this removal into one outside the tree.
	st, err := durable.Lstat(q)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", nil
	}
	if ok, err := builtByPisess(q, known); err != nil || !ok {
		return "", err
	}
	if ok, err := sourceStillHolds(q, jb.session.Path); err != nil || !ok {
		return "", err
	}
	if err := j.Append(ledger.NoteRecord(ledger.Note{CorrelationID: cid, At: now, Session: jb.session.Path,
		Kind: ledger.NoteDiscarded, Path: res.Sidecar, QuarantinePath: q,
		Detail: "the displaced sidecar was built by pisess and the session file still holds the bytes it was built from: not kept"})); err != nil {
		return "", fmt.Errorf("journal discarded note: %w", err)
	}
	if err := os.RemoveAll(q); err != nil {
		return "", fmt.Errorf("remove reproducible displaced sidecar %s: %w", q, err)
	}
	removeEmptyParents(filepath.Dir(q), ledger.Quarantine(tree, cid))
	_ = ops.SyncDir(filepath.Dir(q))
	return "the displaced sidecar was reproducible from the source and was not kept (rollback of this run leaves pi reading the session file)", nil
}

// builtByPisess reports whether the store's own ledger ends with a
// completed event of a run the tree journal knows.
func builtByPisess(store string, known map[string]bool) (bool, error) {
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
			return known[evs[i].CorrelationID], nil
		}
	}
	return false, nil
}

// sourceStillHolds reports whether the session file begins with the bytes
// the store's source-state fingerprint describes (length and SHA-256).
func sourceStillHolds(store, session string) (bool, error) {
	f, err := durable.OS.OpenNoFollow(filepath.Join(store, "source-state.json"), os.O_RDONLY, 0)
	if err != nil {
		return false, nil
	}
	b, err := io.ReadAll(io.LimitReader(f, wire.MaxSourceStateBytes+1))
	f.Close()
	if err != nil {
		return false, nil
	}
	st, err := wire.ParseSourceState(b)
	if err != nil || st.SourceFingerprint == nil {
		return false, nil
	}
	fp := st.SourceFingerprint
	src, err := durable.OS.OpenNoFollow(session, os.O_RDONLY, 0)
	if err != nil {
		return false, fmt.Errorf("reread %s: %w", session, err)
	}
	defer src.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(src, int64(fp.ByteLength)))
	if err != nil {
		return false, fmt.Errorf("reread %s: %w", session, err)
	}
	return uint64(n) == fp.ByteLength && hex.EncodeToString(h.Sum(nil)) == strings.ToLower(fp.SHA256), nil
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
