package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/fixtures/trees"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// migClock is the clock the reference vectors were written with
// (vectors/README.md): stores built with it are byte-comparable.
func migClock() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// migOptions are the options of a test run over paths: the fixed clock, two
// jobs, a lock timeout that a test never waits out by accident.
func migOptions(paths ...string) MigrateOptions {
	return MigrateOptions{Paths: paths, Jobs: 2, Clock: migClock, LockTimeout: 10 * time.Second}
}

// migRun runs Migrate and fails the test on an error.
func migRun(tb testing.TB, opt MigrateOptions) MigrateReport {
	tb.Helper()
	rep, err := Migrate(context.Background(), opt)
	if err != nil {
		tb.Fatalf("migrate %v: %v", opt.Paths, err)
	}
	if rep.Totals.Sessions != len(rep.Sessions) {
		tb.Errorf("totals count %d sessions, the report lists %d", rep.Totals.Sessions, len(rep.Sessions))
	}
	return rep
}

// migResult returns the result of session path, failing when it is absent.
func migResult(tb testing.TB, rep MigrateReport, path string) SessionResult {
	tb.Helper()
	for _, s := range rep.Sessions {
		if s.Path == path {
			return s
		}
	}
	tb.Fatalf("%s is not in the report", path)
	return SessionResult{}
}

// migAllVerified checks that a migrated (or dry-run verified) session's
// report says every verification flag is true.
func migAllVerified(tb testing.TB, s SessionResult) {
	tb.Helper()
	v := s.Verification
	if v == nil || !v.EntryCountMatch || !v.HashChainMatch || !v.IndexConsistent {
		tb.Errorf("%s: verification %+v, want all true", s.Path, v)
	}
}

// migJournal returns the tree journal's records of run cid.
func migJournal(tb testing.TB, tree, cid string) []ledger.Record {
	tb.Helper()
	j, err := ledger.OpenJournal(tree)
	if err != nil {
		tb.Fatal(err)
	}
	recs, err := j.Records(cid)
	if err != nil {
		tb.Fatalf("journal of %s: %v", tree, err)
	}
	return recs
}

// migEventPhases lists the phases of the events in recs about session.
func migEventPhases(recs []ledger.Record, session string) []wire.Phase {
	var out []wire.Phase
	for _, r := range recs {
		if r.Event != nil && r.Event.SourcePath == session {
			out = append(out, r.Event.Phase)
		}
	}
	return out
}

// migFullPhases is what a migration that installed a sidecar records.
var migFullPhases = []wire.Phase{wire.PhasePlanned, wire.PhaseStagingCopy, wire.PhaseIntegrityCheck, wire.PhaseCutoverCommit, wire.PhaseCompleted}

func migSamePhases(a, b []wire.Phase) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// migCheckJournal checks that the tree journal holds the run's full phase
// sequence for session, each event carrying the run's id and naming the
// final sidecar.
func migCheckJournal(tb testing.TB, recs []ledger.Record, session, cid string) {
	tb.Helper()
	if got := migEventPhases(recs, session); !migSamePhases(got, migFullPhases) {
		tb.Errorf("%s: journal phases %v, want %v", session, got, migFullPhases)
	}
	for _, r := range recs {
		if r.Event == nil || r.Event.SourcePath != session {
			continue
		}
		if r.Event.CorrelationID != cid || r.Event.TargetPath != discover.SidecarPath(session) || r.Event.Outcome != wire.OutcomeOK {
			tb.Errorf("%s: journal event %+v", session, *r.Event)
		}
	}
}

// migCheckInstalled checks an installed sidecar the way pi would meet it:
// its own ledger holds planned, staging_copy, integrity_check,
// cutover_commit and completed of run cid, each naming the final <stem>.v2;
// source-state.json is clean with the fingerprint of the session file as it
// is now (read independently of pisess's codec); the reference's status
// calls it migrated; and it breaks no acceptance rule, ownership by owner
// included (-1: not checked).
func migCheckInstalled(tb testing.TB, session, cid string, uid, gid int) {
	tb.Helper()
	sidecar := discover.SidecarPath(session)
	evs, err := ledger.ReadStoreEvents(sidecar)
	if err != nil {
		tb.Fatalf("%s: store ledger: %v", sidecar, err)
	}
	var phases []wire.Phase
	for _, ev := range evs {
		phases = append(phases, ev.Phase)
		if ev.CorrelationID != cid || ev.TargetPath != sidecar || ev.SourcePath != session || ev.Outcome != wire.OutcomeOK ||
			ev.TargetFormat != wire.FormatNativeV2 {
			tb.Errorf("%s: store ledger event %+v", sidecar, ev)
		}
		if ev.Phase == wire.PhaseCompleted && ev.Verification != (wire.Verification{EntryCountMatch: true, HashChainMatch: true, IndexConsistent: true}) {
			tb.Errorf("%s: completed event with verification %+v", sidecar, ev.Verification)
		}
	}
	if !migSamePhases(phases, migFullPhases) {
		tb.Errorf("%s: store ledger phases %v, want %v", sidecar, phases, migFullPhases)
	}
	migCheckCleanState(tb, session)
	st, err := verify.Status(session)
	if err != nil {
		tb.Fatalf("%s: status: %v", session, err)
	}
	if st.Class != verify.ClassMigrated {
		tb.Errorf("%s: status %s, findings %v", session, st.Class, st.Findings)
	}
	if f := verify.Acceptance(sidecar, session, verify.AcceptOptions{OwnerUID: uid, OwnerGID: gid}); len(f) > 0 {
		tb.Errorf("%s: acceptance findings %v", sidecar, f)
	}
}

// migSourceState is source-state.json as encoding/json reads it.
type migSourceState struct {
	Schema            string `json:"schema"`
	State             string `json:"state"`
	SourceFingerprint *struct {
		ByteLength   uint64 `json:"byteLength"`
		SHA256       string `json:"sha256"`
		FileIdentity *struct {
			Device                uint64 `json:"device"`
			Inode                 uint64 `json:"inode"`
			ChangeTimeSeconds     int64  `json:"changeTimeSeconds"`
			ChangeTimeNanoseconds int64  `json:"changeTimeNanoseconds"`
		} `json:"fileIdentity"`
	} `json:"sourceFingerprint"`
}

// migCheckCleanState checks that session's sidecar has a clean
// source-state.json whose fingerprint is the session file's as it is now:
// length, SHA-256 and identity (device, inode, ctime).
func migCheckCleanState(tb testing.TB, session string) {
	tb.Helper()
	path := filepath.Join(discover.SidecarPath(session), "source-state.json")
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("source state: %v", err)
	}
	var st migSourceState
	if err := json.Unmarshal(b, &st); err != nil || !strings.HasSuffix(string(b), "}\n") || strings.Count(string(b), "\n") != 1 {
		tb.Fatalf("%s: %q: %v", path, b, err)
	}
	fi, err := os.Stat(session)
	if err != nil {
		tb.Fatal(err)
	}
	sys, _ := durable.StatOf(fi)
	fp := st.SourceFingerprint
	switch {
	case st.Schema != "pi.session_store_v2.source_state.v1" || st.State != "clean" || fp == nil || fp.FileIdentity == nil:
		tb.Errorf("%s: %s", path, b)
	case fp.ByteLength != uint64(fi.Size()) || fp.SHA256 != fixtures.SHA256File(tb, session):
		tb.Errorf("%s claims %d bytes %s; the source has %d bytes %s", path, fp.ByteLength, fp.SHA256, fi.Size(), fixtures.SHA256File(tb, session))
	case fp.FileIdentity.Device != uint64(sys.Dev) || fp.FileIdentity.Inode != sys.Ino ||
		fp.FileIdentity.ChangeTimeSeconds != sys.Ctime.Sec || fp.FileIdentity.ChangeTimeNanoseconds != sys.Ctime.Nsec:
		tb.Errorf("%s: identity %+v, the source has dev %d ino %d ctime %d.%09d", path, *fp.FileIdentity, sys.Dev, sys.Ino, sys.Ctime.Sec, sys.Ctime.Nsec)
	}
}

// migLeftovers lists every staging or backup directory under root: an
// interrupted or failed run's partial output, which must never be left.
func migLeftovers(tb testing.TB, root string) []string {
	tb.Helper()
	var out []string
	for rel := range fixtures.TreeDigest(tb, root) {
		base := filepath.Base(rel)
		if strings.Contains(base, ".v2.staging.") || strings.Contains(base, ".v2.backup.") {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out
}

// migDigestDiff lists the paths whose digest differs between a and b,
// except those for which skip returns true.
func migDigestDiff(a, b map[string]string, skip func(rel string) bool) []string {
	var out []string
	for k, v := range a {
		if (skip == nil || !skip(k)) && b[k] != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && (skip == nil || !skip(k)) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// migIsJournal is a skip function for migDigestDiff: the tree journal,
// which every run appends to.
func migIsJournal(rel string) bool { return rel == ".pisess/journal.jsonl" }

// migVectorsTree copies the vectors vs into a fresh tree and returns its
// root and the placed vectors.
func migVectorsTree(tb testing.TB, vs []trees.Vector) (string, []trees.Vector) {
	tb.Helper()
	dir := tb.TempDir()
	return dir, trees.Copy(tb, dir, vs)
}

// migSession writes a small valid v3 session of n user messages (ids
// e0000001…, chained) as <tree>/--home-u-proj--/<stem>.jsonl, 0600, and
// returns its path and last entry id.
func migSession(tb testing.TB, tree, stem string, n int) (string, string) {
	tb.Helper()
	dir := filepath.Join(tree, trees.CwdDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(`{"type":"session","version":3,"id":"` + migUUID(stem) + `","timestamp":"2026-01-05T10:00:00.000Z","cwd":"/home/u/proj"}` + "\n")
	parent := ""
	for i := 1; i <= n; i++ {
		id := migEntryID(i)
		b.WriteString(migEntryLine(id, parent, "message "+id))
		parent = id
	}
	path := filepath.Join(dir, stem+".jsonl")
	trees.WriteFile(tb, path, []byte(b.String()))
	return path, parent
}

// migEntryID is the id of the i-th entry migSession writes.
func migEntryID(i int) string {
	const digits = "0123456789abcdef"
	b := []byte("e0000000")
	for p := 7; p > 0 && i > 0; p-- {
		b[p] = digits[i%16]
		i /= 16
	}
	return string(b)
}

// migEntryLine is one valid v3 user message entry line, with newline.
func migEntryLine(id, parent, text string) string {
	p := `null`
	if parent != "" {
		p = `"` + parent + `"`
	}
	return `{"type":"message","id":"` + id + `","parentId":` + p + `,"timestamp":"2026-01-05T10:00:01.000Z","message":{"role":"user","content":"` + text + `","timestamp":1767607201000}}` + "\n"
}

// migUUID derives a stable UUID-shaped session id from a name.
func migUUID(name string) string {
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:])
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

// migStatOwner returns the owner of fi.
func migStatOwner(fi os.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, -1, false
	}
	return int(st.Uid), int(st.Gid), true
}
