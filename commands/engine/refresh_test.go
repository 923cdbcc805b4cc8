package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/fixtures/pi"
	"pisess/fixtures/trees"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/readers/jsonl"
	"pisess/rollback"
	"pisess/verify"
	"pisess/writers"
	"pisess/writers/store"
)

// incAppend appends n entries to the session at path, each a copy of its
// last entry with an id (or of a plain user message) given a fresh id and
// chained to the one before, as pi appends: whole lines.
func incAppend(tb testing.TB, path string, n int, tag string) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var last map[string]json.RawMessage
	parent := ""
	for _, line := range bytes.Split(b, []byte("\n"))[1:] {
		var m map[string]json.RawMessage
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		if id, ok := m["id"]; ok && string(id) != "null" {
			last, parent = m, strings.Trim(string(id), `"`)
		}
	}
	var out bytes.Buffer
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s%04x", tag, i)
		if last == nil {
			out.WriteString(migEntryLine(id, parent, "appended "+id))
		} else {
			last["id"] = json.RawMessage(`"` + id + `"`)
			last["parentId"] = json.RawMessage(`null`)
			if parent != "" {
				last["parentId"] = json.RawMessage(`"` + parent + `"`)
			}
			line, err := json.Marshal(last)
			if err != nil {
				tb.Fatal(err)
			}
			out.Write(append(line, '\n'))
		}
		parent = id
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := f.Write(out.Bytes()); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// incStoreFiles returns the bytes of a store's segments, index and
// manifest, by relative path: what must be identical between a refresh in
// place and a full rebuild at the same clock.
func incStoreFiles(tb testing.TB, root string) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	for _, pat := range []string{"segments/*", "index/*", "manifest.json"} {
		names, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			tb.Fatal(err)
		}
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				tb.Fatal(err)
			}
			rel, _ := filepath.Rel(root, n)
			out[rel] = b
		}
	}
	return out
}

// incSameAsFull checks that session's sidecar is byte for byte what a
// full Stage of its source writes at the test clock.
func incSameAsFull(tb testing.TB, session string, maxSeg int64) {
	tb.Helper()
	src, err := jsonl.Open(session, jsonl.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	dir := filepath.Join(tb.TempDir(), "full.v2")
	if _, err := writers.Stage(context.Background(), src, dir, writers.StageOptions{MaxSegmentBytes: maxSeg, Clock: migClock}); err != nil {
		tb.Fatal(err)
	}
	got, want := incStoreFiles(tb, discoverSidecar(session)), incStoreFiles(tb, dir)
	var names []string
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(got) != len(want) {
		tb.Errorf("%s: %d store files, the full rebuild has %d", session, len(got), len(want))
	}
	for _, n := range names {
		if !bytes.Equal(got[n], want[n]) {
			tb.Errorf("%s: %s differs from the full rebuild's", session, n)
		}
	}
}

func discoverSidecar(session string) string {
	return strings.TrimSuffix(session, filepath.Ext(session)) + ".v2"
}

// incVerify checks the installed sidecar against its whole source.
func incVerify(tb testing.TB, session string) {
	tb.Helper()
	src, err := jsonl.Open(session, jsonl.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	rep, err := verify.AgainstSource(context.Background(), src, discoverSidecar(session), verify.Options{SourcePath: session})
	if err != nil {
		tb.Fatal(err)
	}
	if !rep.Verified() || len(rep.Findings) > 0 {
		tb.Errorf("%s: not verified: %v", session, rep.Findings)
	}
}

// incMigratedVectors migrates a tree of every vector set with segments of
// maxSeg bytes (0: the default) and returns the options and the sessions
// migrated. header_only is left out: once its session gains entries, its
// index-less sidecar is "partial" (FORMAT.md §9), which migrate leaves to
// fsck rather than refreshing.
func incMigratedVectors(tb testing.TB, maxSeg int64) (MigrateOptions, []string) {
	tb.Helper()
	tree, vs := migVectorsTree(tb, trees.Without(trees.Vectors(tb, "accept", "edge", "realpi"), "accept/header_only"))
	opt := migOptions(tree)
	opt.MaxSegmentBytes = maxSeg
	rep := migRun(tb, opt)
	var migrated []string
	for _, v := range vs {
		if migResult(tb, rep, v.Path).Outcome == OutcomeDone {
			migrated = append(migrated, v.Path)
		}
	}
	return opt, migrated
}

// incRefreshedAsFull checks that each session of paths was refreshed in
// place, verified, into the store a full rebuild writes.
func incRefreshedAsFull(tb testing.TB, rep MigrateReport, paths []string, maxSeg int64) {
	tb.Helper()
	for _, p := range paths {
		r := migResult(tb, rep, p)
		if r.Outcome != OutcomeDone || !r.Incremental {
			tb.Errorf("%s: outcome %s incremental %v (%v, %v)", p, r.Outcome, r.Incremental, r.Notes, r.Error)
			continue
		}
		migAllVerified(tb, r)
		incSameAsFull(tb, p, maxSeg)
	}
}

// incRefreshedInPlace checks that each session of paths was refreshed in
// place, as its note says: the sidecar holds this run's events only and
// nothing of it went to the quarantine.
func incRefreshedInPlace(tb testing.TB, rep MigrateReport, paths []string) {
	tb.Helper()
	for _, p := range paths {
		r := migResult(tb, rep, p)
		if !strings.Contains(strings.Join(r.Notes, "; "), "refreshed in place") {
			tb.Errorf("%s: refreshed %v, want in place", p, r.Notes)
			continue
		}
		if r.Displaced != "" {
			tb.Errorf("%s: a refresh in place displaced %s", p, r.Displaced)
		}
		evs, err := ledger.ReadStoreEvents(discoverSidecar(p))
		if err != nil || len(evs) != 5 {
			tb.Fatalf("%s: the store ledger holds %d events (%v), want this run's 5", p, len(evs), err)
		}
		for _, ev := range evs {
			if ev.CorrelationID != rep.CorrelationID {
				tb.Errorf("%s: the store ledger holds an event of run %s", p, ev.CorrelationID)
			}
		}
	}
}

// TestIncrementalRefreshVectors migrates every vector, appends entries to
// each migrated session, and migrates again, twice: each refresh must be
// in place and byte-identical to a full rebuild, with the default segment
// size and with one small enough that the appended entries roll over into
// new segments, whether the sidecar's frames are vouched for by the fresh
// cache (not read: pi left the sidecar as it was, as the TypeScript pi
// does) or CRC-checked (the Rust pi marked it dirty, a change the cache
// sees). TestIncrementalRefreshBranches covers the third way, the frames
// read for their links.
func TestIncrementalRefreshVectors(t *testing.T) {
	for _, maxSeg := range []int64{0, 4096} {
		for _, dirty := range []bool{false, true} {
			t.Run(fmt.Sprintf("max-%d/marked dirty %v", maxSeg, dirty), func(t *testing.T) {
				opt, migrated := incMigratedVectors(t, maxSeg)
				if len(migrated) < 20 {
					t.Fatalf("only %d vectors migrated", len(migrated))
				}
				for round, tag := range []string{"a1", "b2"} {
					vouched := 0
					for _, p := range migrated {
						incAppend(t, p, 5-3*round, tag)
						if dirty {
							fixtures.MarkDirty(t, discoverSidecar(p))
						}
						s := discover.Session{Path: p, Rel: mustRel(t, opt.Paths[0], p), Sidecar: discoverSidecar(p)}
						if _, ok := verify.LoadFreshCache(opt.Paths[0], (*seams)(nil).freshJudges()).FramesVouched(s); ok {
							vouched++
						}
					}
					// A sidecar of more names than the cache keeps
					// (small segments) is never vouched for.
					if dirty && vouched > 0 || !dirty && vouched < len(migrated)*3/4 {
						t.Fatalf("round %d: %d of %d sidecars' frames vouched for, marked dirty %v", round, vouched, len(migrated), dirty)
					}
					t.Logf("round %d: %d of %d sidecars' frames vouched for", round, vouched, len(migrated))
					rep := migRun(t, opt)
					incRefreshedAsFull(t, rep, migrated, maxSeg)
					incRefreshedInPlace(t, rep, migrated)
					if rep.Totals.Refreshed != len(migrated) {
						t.Errorf("round %d: refreshed %d, want %d", round, rep.Totals.Refreshed, len(migrated))
					}
				}
				for _, p := range migrated {
					incVerify(t, p)
				}
			})
		}
	}
}

// TestIncrementalRefreshEndToEnd: migrate → append → migrate reports an
// incremental refresh whose store verifies against the source; a third run
// changes nothing, the record included.
func TestIncrementalRefreshEndToEnd(t *testing.T) {
	tree := t.TempDir()
	path, _ := migSession(t, tree, "e2e", 20)
	migRun(t, migOptions(tree))
	record := ledger.RefreshRecordPath(tree)
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("no refresh record after the first migration: %v", err)
	}
	incAppend(t, path, 3, "c3")
	fixtures.MarkDirty(t, discoverSidecar(path))
	rep := migRun(t, migOptions(tree))
	r := migResult(t, rep, path)
	if r.Outcome != OutcomeDone || !r.Incremental || r.Action != PlanRefresh || rep.Totals.Refreshed != 1 {
		t.Fatalf("second run: %+v", r)
	}
	if len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "3 entries appended to the 20") {
		t.Errorf("notes %q", r.Notes)
	}
	migAllVerified(t, r)
	incVerify(t, path)
	incSameAsFull(t, path, 0)
	migCheckCleanState(t, path)
	before := fixtures.TreeDigest(t, tree)
	st1, _ := os.Stat(record)
	rep = migRun(t, migOptions(tree))
	if r := migResult(t, rep, path); r.Outcome != OutcomeSkipped {
		t.Errorf("third run: %s", r.Outcome)
	}
	st2, _ := os.Stat(record)
	if !st1.ModTime().Equal(st2.ModTime()) || !os.SameFile(st1, st2) {
		t.Error("a run that changed nothing rewrote the refresh record")
	}
	if d := migDigestDiff(before, fixtures.TreeDigest(t, tree), migIsJournal); len(d) > 0 {
		t.Errorf("a no-op run changed %v", d)
	}
}

// TestIncrementalRefreshFallbacks: whenever the record, the source or the
// old store does not allow an incremental refresh, the refresh is a full
// rebuild, verified and identical to one.
func TestIncrementalRefreshFallbacks(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(t *testing.T, tree, path string) // after the first migration
		outcome Outcome
	}{
		{"record missing", func(t *testing.T, tree, path string) {
			os.Remove(ledger.RefreshRecordPath(tree))
			incAppend(t, path, 2, "d1")
		}, OutcomeDone},
		{"record forged digest", func(t *testing.T, tree, path string) {
			editRecord(t, tree, func(r *ledger.RefreshRecord) { r.SourceSHA256 = strings.Repeat("0", 64) })
			incAppend(t, path, 2, "d2")
		}, OutcomeDone},
		{"record of another manifest", func(t *testing.T, tree, path string) {
			editRecord(t, tree, func(r *ledger.RefreshRecord) { r.ManifestIno++ })
			incAppend(t, path, 2, "d3")
		}, OutcomeDone},
		{"record with another chain", func(t *testing.T, tree, path string) {
			editRecord(t, tree, func(r *ledger.RefreshRecord) { r.ChainHash = strings.Repeat("1", 64) })
			incAppend(t, path, 2, "d4")
		}, OutcomeDone},
		{"record not JSON", func(t *testing.T, tree, path string) {
			os.WriteFile(ledger.RefreshRecordPath(tree), []byte("{"), 0o600)
			incAppend(t, path, 2, "d5")
		}, OutcomeDone},
		{"prefix changed", func(t *testing.T, tree, path string) {
			b, _ := os.ReadFile(path)
			os.WriteFile(path, bytes.Replace(b, []byte("message e0000002"), []byte("message E0000002"), 1), 0o600)
			incAppend(t, path, 2, "d6")
		}, OutcomeDone},
		{"source shrank", func(t *testing.T, tree, path string) {
			b, _ := os.ReadFile(path)
			lines := bytes.SplitAfter(b, []byte("\n"))
			os.WriteFile(path, bytes.Join(lines[:len(lines)-3], nil), 0o600)
		}, OutcomeDone},
		{"old store damaged", func(t *testing.T, tree, path string) {
			seg := filepath.Join(discoverSidecar(path), "segments", "0000000000000001.seg")
			fixtures.FlipByte(t, seg, 300)
			incAppend(t, path, 2, "d7")
		}, OutcomeDone},
		{"old store has an extra segment", func(t *testing.T, tree, path string) {
			os.WriteFile(filepath.Join(discoverSidecar(path), "segments", "0000000000000001.seg.bak"), nil, 0o600)
			incAppend(t, path, 2, "d8")
		}, OutcomeDone},
		{"record forged XXH3", func(t *testing.T, tree, path string) {
			// The prefix is proved by its XXH3 alone: a record whose
			// XXH3 is not the source's is a changed prefix.
			editRecord(t, tree, func(r *ledger.RefreshRecord) { r.SourceXXH3 = strings.Repeat("3", 32) })
			incAppend(t, path, 2, "da")
		}, OutcomeDone},
		{"record of another manifest's bytes", func(t *testing.T, tree, path string) {
			// The store's frames are copied on the record's word, which
			// must then be about these very bytes.
			editRecord(t, tree, func(r *ledger.RefreshRecord) { r.ManifestSHA256 = strings.Repeat("2", 64) })
			incAppend(t, path, 2, "d9")
		}, OutcomeDone},
		{"appended duplicate id", func(t *testing.T, tree, path string) {
			appendLine(t, path, migEntryLine(migEntryID(3), migEntryID(20), "dup"))
		}, OutcomeRefused},
		{"appended forward parent", func(t *testing.T, tree, path string) {
			appendLine(t, path, migEntryLine("f0000002", "f0000001", "child first")+migEntryLine("f0000001", migEntryID(20), "parent second"))
		}, OutcomeDone},
		{"appended entry without id", func(t *testing.T, tree, path string) {
			appendLine(t, path, `{"type":"message","parentId":null,"timestamp":"2026-01-05T10:00:01.000Z","message":{"role":"user","content":"idless","timestamp":1767607201000}}`+"\n")
		}, OutcomeDone},
		{"appended line refused", func(t *testing.T, tree, path string) {
			appendLine(t, path, `{"type":"message","id":"g0000001",`+"\n")
		}, OutcomeRefused},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tree := t.TempDir()
			path, _ := migSession(t, tree, "fb", 20)
			migRun(t, migOptions(tree))
			c.prepare(t, tree, path)
			fixtures.MarkDirty(t, discoverSidecar(path))
			rep := migRun(t, migOptions(tree))
			r := migResult(t, rep, path)
			if r.Outcome != c.outcome || r.Incremental {
				t.Fatalf("outcome %s incremental %v, want %s by a full rebuild (%v)", r.Outcome, r.Incremental, c.outcome, r.Error)
			}
			if c.outcome == OutcomeDone {
				migAllVerified(t, r)
				incVerify(t, path)
				incSameAsFull(t, path, 0)
			}
		})
	}
}

// TestIncrementalRefreshTornLastLine: a session whose last line had no
// newline when its sidecar was built is refreshed in full once pi
// completes the line and appends more.
func TestIncrementalRefreshTornLastLine(t *testing.T) {
	tree := t.TempDir()
	path, _ := migSession(t, tree, "torn", 5)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.TrimSuffix(b, []byte("\n")), 0o600)
	migRun(t, migOptions(tree))
	appendLine(t, path, "\n"+migEntryLine("h0000001", migEntryID(5), "after the torn line"))
	fixtures.MarkDirty(t, discoverSidecar(path))
	r := migResult(t, migRun(t, migOptions(tree)), path)
	if r.Outcome != OutcomeDone || r.Incremental {
		t.Fatalf("outcome %s incremental %v", r.Outcome, r.Incremental)
	}
	incVerify(t, path)
	incSameAsFull(t, path, 0)
}

func appendLine(tb testing.TB, path, s string) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		tb.Fatal(err)
	}
}

func editRecord(tb testing.TB, tree string, edit func(*ledger.RefreshRecord)) {
	tb.Helper()
	b, err := os.ReadFile(ledger.RefreshRecordPath(tree))
	if err != nil {
		tb.Fatal(err)
	}
	var rf ledger.StateFile[ledger.RefreshRecord]
	if err := json.Unmarshal(b, &rf); err != nil {
		tb.Fatal(err)
	}
	for k, r := range rf.Sessions {
		edit(&r)
		rf.Sessions[k] = r
	}
	if b, err = json.Marshal(rf); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(ledger.RefreshRecordPath(tree), b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// TestIncrementalRefreshRealPiAppends: the real TypeScript pi appends to
// real pi sessions (it leaves the sidecar's fingerprint mismatching rather
// than marking it dirty, FORMAT.md §12); the refresh continues each
// sidecar in place, byte for byte the full rebuild.
func TestIncrementalRefreshRealPiAppends(t *testing.T) {
	pi.Require(t)
	tree, vs := migVectorsTree(t, trees.Vectors(t, "realpi"))
	rep := migRun(t, migOptions(tree))
	var migrated []string
	for _, v := range vs {
		if migResult(t, rep, v.Path).Outcome == OutcomeDone {
			migrated = append(migrated, v.Path)
		}
	}
	if len(migrated) < 5 {
		t.Fatalf("only %d realpi sessions migrated", len(migrated))
	}
	for i, p := range migrated {
		before, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pi.Append(t, p, fmt.Sprintf("one more question, number %d", i))
		after, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) <= len(before) || !bytes.HasPrefix(after, before) {
			t.Fatalf("%s: pi did not append (%d → %d bytes)", p, len(before), len(after))
		}
	}
	rep = migRun(t, migOptions(tree))
	for _, p := range migrated {
		r := migResult(t, rep, p)
		if r.Outcome != OutcomeDone || r.Action != PlanRefresh || !r.Incremental {
			t.Errorf("%s: %s/%s incremental %v (%v %v)", p, r.Action, r.Outcome, r.Incremental, r.Notes, r.Error)
			continue
		}
		migAllVerified(t, r)
		incSameAsFull(t, p, 0)
		incVerify(t, p)
	}
	incRefreshedInPlace(t, rep, migrated)
}

// entryIDs returns the ids of the session's entries, in file order.
func entryIDs(tb testing.TB, path string) []string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var ids []string
	for _, line := range bytes.Split(b, []byte("\n"))[1:] {
		var e struct {
			ID *string `json:"id"`
		}
		if json.Unmarshal(line, &e) == nil && e.ID != nil {
			ids = append(ids, *e.ID)
		}
	}
	return ids
}

// TestIncrementalRefreshBranches: the refresh in place checks the old
// store's frames by their CRC only, or not at all (the record vouches for
// the rest), so it does not know the old entries' links; entries appended
// as pi's branching appends them — two children of the last entry, or a
// child of an earlier entry (whose branch count only the old frames know:
// they are then read for their links) — still give, in place, a store
// byte-identical to a full rebuild, with the default segment size and
// with small segments.
func TestIncrementalRefreshBranches(t *testing.T) {
	for _, maxSeg := range []int64{0, 4096} {
		for _, from := range []string{"last, twice", "first", "second to last"} {
			t.Run(fmt.Sprintf("max-%d/from %s", maxSeg, from), func(t *testing.T) {
				opt, migrated := incMigratedVectors(t, maxSeg)
				var refreshed []string
				for _, path := range migrated {
					ids := entryIDs(t, path)
					if len(ids) < 3 {
						continue
					}
					var lines string
					switch from {
					case "last, twice":
						last := ids[len(ids)-1]
						lines = migEntryLine("br0001", last, "one") + migEntryLine("br0002", last, "two")
					case "first":
						lines = migEntryLine("br0001", ids[0], "one") + migEntryLine("br0002", "br0001", "two")
					case "second to last":
						lines = migEntryLine("br0001", ids[len(ids)-2], "one")
					}
					migAppend(t, path, lines)
					fixtures.MarkDirty(t, discoverSidecar(path))
					refreshed = append(refreshed, path)
				}
				if len(refreshed) < 8 {
					t.Fatalf("only %d sessions to refresh", len(refreshed))
				}
				rep := migRun(t, opt)
				incRefreshedAsFull(t, rep, refreshed, maxSeg)
				incRefreshedInPlace(t, rep, refreshed)
			})
		}
	}
}

// TestIncrementalRefreshIncompleteRecord: a refresh record that lacks a
// member a refresh in place relies on (the manifest digest, the source's
// PrefixHash, the index digest state: no pisess whose state files this one
// reads writes such a record) or whose SHA-256 state (of the source or of
// the index) does not finish as its own digest is not used: the refresh is
// a full rebuild, verified and byte-identical to one, which leaves a
// complete record, and the next refresh goes in place from it.
func TestIncrementalRefreshIncompleteRecord(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(r *ledger.RefreshRecord)
	}{
		{"no manifest digest", func(r *ledger.RefreshRecord) { r.ManifestSHA256 = "" }},
		{"no PrefixHash", func(r *ledger.RefreshRecord) { r.SourceXXH3, r.SourceSHA256State = "", "" }},
		{"no index digest state", func(r *ledger.RefreshRecord) { r.IndexSHA256State = "" }},
		{"none of them (an older pisess)", func(r *ledger.RefreshRecord) {
			r.ManifestSHA256, r.SourceXXH3, r.SourceSHA256State, r.IndexSHA256State = "", "", "", ""
		}},
		{"state not its digest", func(r *ledger.RefreshRecord) {
			st := []byte(r.SourceSHA256State)
			st[20] ^= 1 // a hex digit of the chaining values: still hex
			r.SourceSHA256State = string(st)
		}},
		{"index state not its digest", func(r *ledger.RefreshRecord) {
			st := []byte(r.IndexSHA256State)
			st[20] ^= 1
			r.IndexSHA256State = string(st)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tree := t.TempDir()
			path, _ := migSession(t, tree, "older", 12)
			migRun(t, migOptions(tree))
			rel, _ := filepath.Rel(tree, path)
			if _, ok := ledger.LoadRefreshRecords(tree).Get(rel); !ok {
				t.Fatal("the first migration left no complete record")
			}
			editRecord(t, tree, c.edit)
			for i, tag := range []string{"o1", "o2"} {
				incAppend(t, path, 3, tag)
				fixtures.MarkDirty(t, discoverSidecar(path))
				r := migResult(t, migRun(t, migOptions(tree)), path)
				if inPlace := i == 1; r.Outcome != OutcomeDone || r.Incremental != inPlace {
					t.Fatalf("refresh %d: outcome %s in place %v, want in place %v (%v)", i, r.Outcome, r.Incremental, inPlace, r.Error)
				}
				migAllVerified(t, r)
				incVerify(t, path)
				incSameAsFull(t, path, 0)
				rec, ok := ledger.LoadRefreshRecords(tree).Get(rel)
				if !ok {
					t.Fatalf("refresh %d: the new record is not complete", i)
				}
				if want := fixtures.SHA256File(t, path); rec.SourceSHA256 != want {
					t.Fatalf("refresh %d: the record's digest is not the source's", i)
				}
			}
		})
	}
}

// TestRefreshInPlace: a sidecar that pi marked dirty after appending (or
// left with a mismatching fingerprint, as the TypeScript pi does) is
// continued where it lies: the same directory, nothing displaced and
// nothing in the quarantine, byte for byte the full rebuild, verified, and
// the next refresh goes in place again.
func TestRefreshInPlace(t *testing.T) {
	for _, rust := range []bool{true, false} {
		name := "fingerprint left (TypeScript pi)"
		if rust {
			name = "marked dirty (Rust pi)"
		}
		t.Run(name, func(t *testing.T) {
			tree := t.TempDir()
			path, _ := migSession(t, tree, "busy", 6)
			migRun(t, migOptions(tree))
			sidecar := discover.SidecarPath(path)
			before, err := os.Lstat(sidecar)
			if err != nil {
				t.Fatal(err)
			}
			for round, tag := range []string{"r1", "r2"} {
				incAppend(t, path, 2, tag)
				if rust {
					fixtures.MarkDirty(t, sidecar)
				}
				rep := migRun(t, migOptions(tree))
				r := migResult(t, rep, path)
				if r.Outcome != OutcomeDone || !r.Incremental || r.Displaced != "" {
					t.Fatalf("round %d: %s incremental %v displaced %q %v", round, r.Outcome, r.Incremental, r.Displaced, r.Notes)
				}
				incRefreshedInPlace(t, rep, []string{path})
				incSameAsFull(t, path, 0)
				incVerify(t, path)
				after, err := os.Lstat(sidecar)
				if err != nil || !os.SameFile(before, after) {
					t.Fatalf("round %d: the sidecar is another directory (%v)", round, err)
				}
				if st, err := verify.StatusFast(path); err != nil || st.Class != verify.ClassMigrated || len(st.Findings) > 0 {
					t.Fatalf("round %d: status %+v %v", round, st, err)
				}
			}
			if q, err := os.ReadDir(filepath.Join(tree, discover.PisessDir, "quarantine")); err == nil && len(q) > 0 {
				t.Errorf("a refresh in place left %d entries in the quarantine", len(q))
			}
		})
	}
}

// TestRollbackInPlace: a run that continued a sidecar in place is rolled
// back as any run that installed one: the sidecar goes to the quarantine
// and pi reads the session file. The run before it, whose sidecar the
// later run continued, is refused (its sidecar was superseded) while the
// continued one is in place.
func TestRollbackInPlace(t *testing.T) {
	tree := t.TempDir()
	path, _ := migSession(t, tree, "busy", 5)
	first := migRun(t, migOptions(tree))
	incAppend(t, path, 2, "r1")
	fixtures.MarkDirty(t, discover.SidecarPath(path))
	second := migRun(t, migOptions(tree))
	incRefreshedInPlace(t, second, []string{path})
	src := fixtures.SHA256File(t, path)

	rollBack := func(cid string) rollback.TreeSession {
		t.Helper()
		rb, err := rollbackTree(context.Background(), tree, cid, migClock)
		if err != nil || len(rb.Sessions) != 1 {
			t.Fatalf("rollback %s: %+v %v", cid, rb, err)
		}
		return rb.Sessions[0]
	}
	if s := rollBack(first.CorrelationID); s.Error == "" || !strings.Contains(s.Error, "continued in place") {
		t.Fatalf("rollback of the run before the refresh in place: %+v", s)
	}
	if _, err := os.Lstat(discover.SidecarPath(path)); err != nil {
		t.Fatalf("the refused rollback took the sidecar: %v", err)
	}
	if s := rollBack(second.CorrelationID); s.Error != "" || !s.Changed {
		t.Fatalf("rollback of the refresh in place: %+v", s)
	}
	if st, err := verify.StatusFast(path); err != nil || st.Class != verify.ClassUnmigrated {
		t.Fatalf("after the rollback pi should read the session file: %+v %v", st, err)
	}
	if fixtures.SHA256File(t, path) != src {
		t.Fatal("the rollback changed the session file")
	}
	if s := migResult(t, migRun(t, migOptions(tree)), path); s.Outcome != OutcomeDone {
		t.Fatalf("after the rollback: %+v", s)
	}
	incVerify(t, path)
}

// TestRefreshInPlaceYields: while another process holds the sidecar's
// store mutation lock, the refresh is a full rebuild at once (not after
// the session lock's timeout), having written nothing into the sidecar.
func TestRefreshInPlaceYields(t *testing.T) {
	tree := t.TempDir()
	path, _ := migSession(t, tree, "busy", 5)
	migRun(t, migOptions(tree))
	incAppend(t, path, 2, "r1")
	sidecar := discover.SidecarPath(path)
	fixtures.MarkDirty(t, sidecar)
	lock, err := store.LockMutation(context.Background(), sidecar, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	opt := migOptions(tree)
	opt.LockTimeout = 10 * time.Minute
	t0 := time.Now()
	rep := migRun(t, opt)
	if d := time.Since(t0); d > time.Minute {
		t.Fatalf("the refresh waited %v for the store lock", d)
	}
	if r := migResult(t, rep, path); r.Outcome != OutcomeDone || r.Incremental || r.Displaced == "" && !strings.Contains(strings.Join(r.Notes, " "), "not kept") {
		t.Fatalf("%s incremental %v displaced %q %v, want a full rebuild", r.Outcome, r.Incremental, r.Displaced, r.Notes)
	}
	incVerify(t, path)
	incSameAsFull(t, path, 0)
}
