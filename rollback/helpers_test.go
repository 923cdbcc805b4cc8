package rollback

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"pisess/fixtures"
	"pisess/ledger"
	"pisess/readers/jsonl"
	"pisess/verify"
	"pisess/writers"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

func fixedClock() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

const (
	testSessionID = "3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b"
	testMigration = "0b6f2d3e-4c5a-4b7d-9e8f-1a2b3c4d5e6f"
	testRun       = "run-0001-rollback-test"
)

// entryID is the id of the i-th test entry (1-based).
func entryID(i int) string { return fmt.Sprintf("e%07d", i) }

// entryPayload is the canonical payload of the i-th test entry, a custom
// entry chained to the previous one (the keys sorted, as FORMAT.md §2).
func entryPayload(i int) []byte {
	parent := ""
	if i > 1 {
		parent = fmt.Sprintf(`"parentId":%q,`, entryID(i-1))
	}
	return []byte(fmt.Sprintf(`{"customType":"note","data":{"n":%d,"text":"entry number %d"},"id":%q,%s"timestamp":"2026-01-05T10:00:%02d.000Z","type":"custom"}`,
		i, i, entryID(i), parent, i%60))
}

// jsonlLines returns the JSONL lines of entries from..to (1-based,
// inclusive), each with its newline.
func jsonlLines(from, to int) []byte {
	var b []byte
	for i := from; i <= to; i++ {
		parent := "null"
		if i > 1 {
			parent = fmt.Sprintf("%q", entryID(i-1))
		}
		b = append(b, fmt.Sprintf(`{"type":"custom","id":%q,"parentId":%s,"timestamp":"2026-01-05T10:00:%02d.000Z","customType":"note","data":{"n":%d,"text":"entry number %d"}}`+"\n",
			entryID(i), parent, i%60, i, i)...)
	}
	return b
}

func jsonlHeader() []byte {
	return []byte(`{"type":"session","version":3,"id":"` + testSessionID + `","timestamp":"2026-01-05T10:00:00.000Z","cwd":"/home/u/proj"}` + "\n")
}

// writeSession writes a JSONL session of n entries at tree/rel.
func writeSession(tb testing.TB, tree, rel string, n int) string {
	tb.Helper()
	path := filepath.Join(tree, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	data := append(jsonlHeader(), jsonlLines(1, n)...)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// appendEntries appends entries from..to to a session, as pi does.
func appendEntries(tb testing.TB, path string, from, to int) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(jsonlLines(from, to)); err != nil {
		tb.Fatal(err)
	}
}

// buildStore writes a store of n test entries at dir, with a checkpoint
// after each entry count in checkpointsAt, segments of at most maxSeg
// bytes, a manifest, one completed event, and (for a sidecar, source set)
// a clean source-state for source.
func buildStore(tb testing.TB, dir string, n int, checkpointsAt []int, maxSeg int64, source string) {
	tb.Helper()
	w, err := store.Create(dir, store.Options{MaxSegmentBytes: maxSeg, Clock: fixedClock})
	if err != nil {
		tb.Fatal(err)
	}
	cp := 0
	for i := 1; i <= n; i++ {
		parent := ""
		if i > 1 {
			parent = entryID(i - 1)
		}
		if _, err := w.Append(entryID(i), parent, "custom", entryPayload(i)); err != nil {
			tb.Fatal(err)
		}
		if cp < len(checkpointsAt) && checkpointsAt[cp] == i {
			if _, err := w.WriteCheckpoint(wire.ReasonManual); err != nil {
				tb.Fatal(err)
			}
			cp++
		}
	}
	if _, err := w.WriteManifest(testSessionID, "jsonl_v3"); err != nil {
		tb.Fatal(err)
	}
	target := dir
	if source != "" {
		target = SidecarPath(source)
	}
	ev := wire.MigrationEvent{
		MigrationID: testMigration, Phase: wire.PhaseCompleted, SourcePath: orDefault(source, "source.jsonl"), TargetPath: target,
		SourceFormat: wire.FormatJSONLv3, TargetFormat: wire.FormatNativeV2,
		Verification: wire.Verification{EntryCountMatch: true, HashChainMatch: true, IndexConsistent: true},
		Outcome:      wire.OutcomeOK, CorrelationID: "build-0001-fixture",
	}
	if err := w.AppendLedger(ev); err != nil {
		tb.Fatal(err)
	}
	if source != "" {
		d, err := fileDigest(durable.OS, source, "")
		if err != nil {
			tb.Fatal(err)
		}
		if err := w.WriteSourceState(wire.SourceState{State: wire.SourceClean,
			SourceFingerprint: &wire.SourceFingerprint{ByteLength: uint64(d.size), SHA256: d.sha}}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Seal(); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// sidecarFixture is a tree with one JSONL session of n entries and its
// sidecar store holding the same entries, with checkpoints.
type sidecarFixture struct {
	tree, session, sidecar, rel string
}

func newSidecarFixture(tb testing.TB, n int, checkpointsAt []int, maxSeg int64) sidecarFixture {
	tb.Helper()
	tree := tb.(interface{ TempDir() string }).TempDir()
	rel := filepath.Join("--home-u-proj--", "2026-01-05T10-00-00-000Z_"+testSessionID+".jsonl")
	session := writeSession(tb, tree, rel, n)
	sidecar := SidecarPath(session)
	buildStore(tb, sidecar, n, checkpointsAt, maxSeg, session)
	return sidecarFixture{tree: tree, session: session, sidecar: sidecar, rel: rel}
}

// storeProblems returns store.Check's findings as strings.
func storeProblems(tb testing.TB, dir string) []string {
	tb.Helper()
	st, err := store.Open(dir, store.ReadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, p := range st.Check() {
		out = append(out, p.String())
	}
	return out
}

// comparableStore digests a store for "equals an uninterrupted rollback":
// every file by content and mode, except that the manifest's updatedAt and
// hash and the events' at are blanked (they record when, not what).
func comparableStore(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	d := fixtures.TreeDigest(tb, dir)
	delete(d, store.ManifestName)
	delete(d, filepath.ToSlash(filepath.Join(store.MigrationsDir, store.LedgerName)))
	if b, err := os.ReadFile(store.ManifestPath(dir)); err == nil {
		m, err := wire.ParseManifest(b)
		if err != nil {
			tb.Fatalf("manifest: %v", err)
		}
		m.UpdatedAt, m.Integrity.ManifestHash = "", ""
		d[store.ManifestName] = string(wire.AppendManifestCompact(nil, m))
	}
	evs, err := ledger.ReadStoreEvents(dir)
	if err != nil {
		tb.Fatalf("ledger: %v", err)
	}
	var lines []string
	for _, ev := range evs {
		ev.At = "2026-01-01T00:00:00.000Z"
		lines = append(lines, string(wire.AppendMigrationEvent(nil, ev)))
	}
	d["ledger-events"] = strings.Join(lines, "")
	return d
}

func diffMaps(a, b map[string]string) string {
	var keys []string
	seen := map[string]bool{}
	for k := range a {
		keys, seen[k] = append(keys, k), true
	}
	for k := range b {
		if !seen[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		if a[k] != b[k] {
			out = append(out, fmt.Sprintf("%s:\n  got  %q\n  want %q", k, a[k], b[k]))
		}
	}
	return strings.Join(out, "\n")
}

func readSourceState(tb testing.TB, sidecar string) wire.SourceState {
	tb.Helper()
	b, err := os.ReadFile(store.SourceStatePath(sidecar))
	if err != nil {
		tb.Fatal(err)
	}
	s, err := wire.ParseSourceState(b)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// withoutLocks drops session lock files from a digest: taking pi's session
// lock creates <session>.lock when pi never has, and pi never deletes it.
func withoutLocks(d map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range d {
		if !strings.HasSuffix(k, ".lock") || strings.HasSuffix(k, store.MutationLockName) {
			out[k] = v
		}
	}
	return out
}

// migration is what migrateRun did.
type migration struct {
	staging string
	result  CutoverResult
}

// migrateRun migrates one session the way the migrate pipeline does it:
// fingerprint, stage into <stem>.v2.staging.<hex> (with the run's
// completed event in the store ledger), verify, cut over, record
// completed in the journal.
func migrateRun(tb testing.TB, tree, session, cid string) migration {
	tb.Helper()
	ctx := context.Background()
	j, err := ledger.OpenJournal(tree)
	if err != nil {
		tb.Fatal(err)
	}
	rel, err := filepath.Rel(tree, session)
	if err != nil {
		tb.Fatal(err)
	}
	sidecar := SidecarPath(session)
	staging := sidecar + ".staging." + strings.ReplaceAll(uuid.NewString(), "-", "")
	fp, err := verify.Fingerprint(session)
	if err != nil {
		tb.Fatal(err)
	}
	completed := wire.MigrationEvent{
		MigrationID: uuid.NewString(), Phase: wire.PhaseCompleted, At: wire.FormatTimestamp(fixedClock()),
		SourcePath: session, TargetPath: sidecar, SourceFormat: wire.FormatJSONLv3, TargetFormat: wire.FormatNativeV2,
		Verification: wire.Verification{EntryCountMatch: true, HashChainMatch: true, IndexConsistent: true},
		Outcome:      wire.OutcomeOK, CorrelationID: cid,
	}
	src, err := jsonl.Open(session, jsonl.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	_, err = writers.Stage(ctx, src, staging, writers.StageOptions{Clock: fixedClock, Events: []wire.MigrationEvent{completed},
		SourceState: &wire.SourceState{State: wire.SourceClean, SourceFingerprint: &fp}})
	src.Close()
	if err != nil {
		tb.Fatal(err)
	}
	uid, gid, err := durable.OS.Owner(session)
	if err != nil {
		tb.Fatal(err)
	}
	if err := durable.OS.ChownTree(staging, uid, gid); err != nil {
		tb.Fatal(err)
	}
	src, err = jsonl.Open(session, jsonl.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	p, rep, err := verify.Verified(ctx, src, staging, session, verify.Options{Fingerprint: &fp})
	src.Close()
	if err != nil {
		tb.Fatalf("verify: %v: %v", err, rep.Findings)
	}
	res, err := Cutover(ctx, p, CutoverSpec{
		SessionPath: session, StagingDir: staging, SidecarDir: sidecar, Tree: tree, CorrelationID: cid, RelPath: rel,
		OwnerUID: uid, OwnerGID: gid, Journal: j, Clock: fixedClock,
	})
	if err != nil {
		tb.Fatalf("cutover: %v", err)
	}
	if res.Warning != "" {
		tb.Fatalf("cutover warning: %s", res.Warning)
	}
	if err := j.Append(ledger.EventRecord(completed)); err != nil {
		tb.Fatal(err)
	}
	return migration{staging: staging, result: res}
}

// treeFixture is a tree with one JSONL session, not migrated.
type treeFixture struct {
	tree, session, rel, sidecar string
}

func newTreeFixture(tb testing.TB, n int) treeFixture {
	tb.Helper()
	tree := tb.(interface{ TempDir() string }).TempDir()
	rel := filepath.Join("--home-u-proj--", "2026-01-05T10-00-00-000Z_"+testSessionID+".jsonl")
	session := writeSession(tb, tree, rel, n)
	return treeFixture{tree: tree, session: session, rel: rel, sidecar: SidecarPath(session)}
}

// userTree digests the tree as pi sees it: without pisess's own .pisess/
// and without lock files (pi creates and never deletes them).
func userTree(tb testing.TB, tree string) map[string]string {
	tb.Helper()
	d := withoutLocks(fixtures.TreeDigest(tb, tree))
	for k := range d {
		if k == ledger.PisessDir || strings.HasPrefix(k, ledger.PisessDir+"/") {
			delete(d, k)
		}
	}
	return d
}

func journalLines(tb testing.TB, tree string) string {
	tb.Helper()
	b, err := os.ReadFile(ledger.JournalPath(tree))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		tb.Fatal(err)
	}
	return string(b)
}
