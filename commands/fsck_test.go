package commands

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"pisess/commands/engine"
	"pisess/fixtures"
	"pisess/ledger"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// appendedEntry continues the example session: pi appending to it makes
// its sidecar stale.
const appendedEntry = `{"type":"session_info","id":"f2a3b4c5","parentId":"e1f2a3b4","timestamp":"2026-01-05T10:00:12.000Z","name":"Renamed"}` + "\n"

func segment1(t fsckTree) string { return store.SegmentPath(t.sidecar, 1) }

// The corruption suite (the fsck section of the rollback/fsck issue; the
// damage tables of STYLE.md §6): each case damages a copy of a store that
// pisess migrate installed, and then
//
//	fsck           exits 4 and reports the finding;
//	fsck --repair  exits 1;
//	fsck           exits 0 and the session is migrated (or unmigrated);
//
// no source byte changes, and every byte the repair removed is in the
// quarantine.
func TestFsckDamageRepairRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, tr fsckTree)
		code   string
		// after is the class the session ends in.
		after verify.Class
		// kept, when set, is exactly what the repair must have kept in the
		// quarantine (a cut tail, a copied journal line).
		kept string
	}{
		{name: "truncate mid-frame", code: verify.CodeSegmentTorn, damage: func(t *testing.T, tr fsckTree) {
			fixtures.Truncate(t, segment1(tr), fileSize(t, segment1(tr))-10)
		}},
		{name: "flip a byte in a frame", code: verify.CodeIndexCRC, damage: func(t *testing.T, tr fsckTree) {
			fixtures.FlipByte(t, segment1(tr), 200)
		}},
		{name: "delete the index", code: verify.CodeIndexMissing, damage: func(t *testing.T, tr fsckTree) {
			if err := os.Remove(store.IndexPath(tr.sidecar)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "append a torn frame to a segment", code: verify.CodeSegmentTorn,
			kept: `{"schema":"pi.session_store_v2.segment_frame.v1","segm`, damage: func(t *testing.T, tr fsckTree) {
				appendFile(t, segment1(tr), `{"schema":"pi.session_store_v2.segment_frame.v1","segm`)
			}},
		{name: "append a garbage line to a segment", code: verify.CodeIndexUncovered, damage: func(t *testing.T, tr fsckTree) {
			appendFile(t, segment1(tr), "garbage\n")
		}},
		{name: "append a torn row to the index", code: verify.CodeIndexTorn,
			kept: `{"schema":"pi.session_store_v2.offset_index.v1","entr`, damage: func(t *testing.T, tr fsckTree) {
				appendFile(t, store.IndexPath(tr.sidecar), `{"schema":"pi.session_store_v2.offset_index.v1","entr`)
			}},
		{name: "append a garbage line to the index", code: verify.CodeIndexInvalid, damage: func(t *testing.T, tr fsckTree) {
			appendFile(t, store.IndexPath(tr.sidecar), "garbage\n")
		}},
		{name: "append a torn line to the store ledger", code: verify.CodeLedgerTorn, kept: `{"schema":"pi.session`, damage: func(t *testing.T, tr fsckTree) {
			appendFile(t, store.LedgerPath(tr.sidecar), `{"schema":"pi.session`)
		}},
		{name: "remove the manifest", code: verify.CodeManifestMissing, damage: func(t *testing.T, tr fsckTree) {
			if err := os.Remove(store.ManifestPath(tr.sidecar)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "chmod 0644 a segment", code: verify.CodeMode, damage: func(t *testing.T, tr fsckTree) {
			if err := os.Chmod(segment1(tr), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "chmod 0755 a directory", code: verify.CodeMode, damage: func(t *testing.T, tr fsckTree) {
			if err := os.Chmod(store.IndexDirPath(tr.sidecar), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "chown a file to uid 65534", code: verify.CodeOwner, damage: func(t *testing.T, tr fsckTree) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to chown")
			}
			if err := os.Lchown(store.IndexPath(tr.sidecar), 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "leave a staging directory", code: verify.CodeTreeStaging, damage: func(t *testing.T, tr fsckTree) {
			copyDir(t, tr.sidecar, tr.sidecar+".staging."+strings.Repeat("ab", 16))
		}},
		{name: "leave a backup beside an installed sidecar", code: verify.CodeTreeBackup, damage: func(t *testing.T, tr fsckTree) {
			copyDir(t, tr.sidecar, tr.sidecar+".backup."+strings.Repeat("cd", 16))
		}},
		{name: "leave a backup and no sidecar", code: verify.CodeTreeBackup, damage: func(t *testing.T, tr fsckTree) {
			if err := os.Rename(tr.sidecar, tr.sidecar+".backup."+strings.Repeat("ef", 16)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "leave a rollback intent half done", code: verify.CodeRollbackIntent, damage: func(t *testing.T, tr fsckTree) {
			writeRollbackIntent(t, tr.sidecar, 5)
		}},
		{name: "stale tree lock", code: verify.CodeTreeStaleLock, damage: func(t *testing.T, tr fsckTree) {
			if err := os.WriteFile(ledger.TreeLockPath(tr.root), []byte("pid=2147483 host=gone started=2026-01-01T00:00:00Z\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "garbage journal line", code: verify.CodeTreeJournal, kept: "{not json\n", damage: func(t *testing.T, tr fsckTree) {
			appendFile(t, ledger.JournalPath(tr.root), "{not json\n")
		}},
		{name: "torn journal line", code: verify.CodeTreeJournal, damage: func(t *testing.T, tr fsckTree) {
			appendFile(t, ledger.JournalPath(tr.root), `{"schema":"pi.session_store_v2.migration_event.v1","migr`)
		}},
		{name: "sidecar whose session is gone", code: verify.CodeTreeOrphan, damage: func(t *testing.T, tr fsckTree) {
			copyDir(t, tr.sidecar, filepath.Join(filepath.Dir(tr.sidecar), "gone.v2"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newFsckTree(t)
			tt.damage(t, tr)
			source := fixtures.SHA256File(t, tr.session)
			before := snapshot(t, tr.root)
			whole := fixtures.TreeDigest(t, tr.root)

			code, rep, r := fsckJSON(t, tr.root)
			if code != ExitProblems || !hasCode(rep, tt.code) {
				t.Fatalf("fsck: exit %d, findings [%s]; want exit 4 and %s\n%s", code, codes(rep), tt.code, r.stderr)
			}
			for _, f := range allFindings(rep) {
				if f.Path == "" || f.Repair == "" || f.Action == "" {
					t.Errorf("finding %s lacks its file, repair or action: %+v", f.Code, f)
				}
			}
			if !maps.Equal(whole, fixtures.TreeDigest(t, tr.root)) {
				t.Fatalf("fsck without --repair changed the tree")
			}

			code, rep, r = fsckJSON(t, tr.root, "--repair")
			if code != ExitRepaired {
				t.Fatalf("fsck --repair: exit %d, findings [%s]; want 1\n%s", code, codes(rep), r.stderr)
			}
			t.Logf("repaired: [%s]", codes(rep))
			cid := rep.CorrelationID
			if cid == "" {
				t.Errorf("fsck --repair reported no correlation id")
			}

			code, rep, r = fsckJSON(t, tr.root)
			if code != ExitClean {
				t.Fatalf("fsck after --repair: exit %d, findings [%s]; want 0\n%s", code, codes(rep), r.stderr)
			}
			want := tt.after
			if want == "" {
				want = verify.ClassMigrated
			}
			if got := rep.Trees[0].Sessions[0].Class; got != want {
				t.Errorf("class after repair %s, want %s", got, want)
			}
			if got := fixtures.SHA256File(t, tr.session); got != source {
				t.Errorf("the source changed: sha256 %s, was %s", got, source)
			}
			assertNothingLost(t, tr.root, before)
			if want == verify.ClassMigrated {
				if r := pisess(t, "verify", tr.session); r.code != ExitClean {
					t.Errorf("verify after repair: %s", r)
				}
			}
			if tt.kept != "" && !quarantineHolds(t, tr.root, tt.kept) {
				t.Errorf("the quarantine holds no file of exactly the %d bytes removed (%q)", len(tt.kept), tt.kept)
			}
			if n := repairNotes(t, tr.root, cid); n == 0 {
				t.Errorf("no journal note of the repair run %s", cid)
			}
			// Migrating again changes nothing.
			digest := fixtures.TreeDigest(t, filepath.Dir(tr.session))
			if r := pisess(t, "migrate", "--json", tr.root); r.code != ExitClean {
				t.Errorf("migrate after repair: %s", r)
			}
			if !maps.Equal(digest, fixtures.TreeDigest(t, filepath.Dir(tr.session))) {
				t.Errorf("migrate after repair changed the session directory")
			}
		})
	}
}

// quarantineHolds reports whether a file of the tree's quarantine holds
// exactly data.
func quarantineHolds(tb testing.TB, root, data string) bool {
	tb.Helper()
	found := false
	_ = filepath.WalkDir(filepath.Join(root, ".pisess", "quarantine"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, err := os.ReadFile(path); err == nil && string(b) == data {
				found = true
			}
		}
		return nil
	})
	return found
}

// repairNotes counts the journal notes of run cid.
func repairNotes(tb testing.TB, root, cid string) int {
	tb.Helper()
	j, err := ledger.OpenJournal(root)
	if err != nil {
		tb.Fatal(err)
	}
	recs, err := j.Records(cid)
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.Note != nil {
			n++
		}
	}
	return n
}

// writeRollbackIntent leaves the store at root exactly as a rollback to a
// checkpoint at entry head leaves it when it dies just after publishing
// its intent (FORMAT.md §6): a checkpoint at head, the retained index rows
// staged in tmp/offsets.rollback.stage, tmp/rollback.intent.json.
func writeRollbackIntent(tb testing.TB, root string, head uint64) {
	tb.Helper()
	st, err := store.Open(root, store.ReadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	m, err := st.Manifest()
	if err != nil {
		tb.Fatal(err)
	}
	chain, id := wire.ChainGenesis, ""
	var stage []byte
	it := st.Entries()
	for it.Next() && it.Row().EntrySeq <= head {
		chain = wire.ChainStep(chain, it.Frame().PayloadSHA256)
		id = it.Frame().EntryID
		stage = wire.AppendIndexRow(stage, it.Row())
	}
	if err := it.Err(); err != nil {
		tb.Fatal(err)
	}
	it.Close()
	cp := wire.Checkpoint{CheckpointSeq: 1, At: fixedClock, HeadEntrySeq: head, HeadEntryID: id,
		SnapshotRef: wire.SnapshotRef(1), ChainHash: chain, Reason: wire.CheckpointReason("manual")}
	if err := os.WriteFile(store.CheckpointPath(root, 1), wire.AppendCheckpoint(nil, cp), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "tmp", "offsets.rollback.stage"), stage, 0o600); err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(stage)
	intent := wire.RollbackIntent{Checkpoint: cp, MigrationID: uuid.NewString(), CorrelationID: "test-rollback-intent",
		RetainedIndexSHA256: hex.EncodeToString(sum[:]), RetainedIndexBytes: uint64(len(stage)),
		Manifest: &wire.IntentManifest{SessionID: m.SessionID, SourceFormat: m.SourceFormat, CreatedAt: m.CreatedAt}}
	if err := wire.CheckRollbackIntent(intent); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(verify.RollbackIntentPath(root), wire.AppendRollbackIntent(nil, intent), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// TestFsckExitCodes pins how an fsck report maps to its exit status:
// fsck(8)'s values, but never a bitwise OR of several (problems repaired
// and problems left together exit 4, not 5), and notices never count.
func TestFsckExitCodes(t *testing.T) {
	problem := verify.FsckFinding{Code: "x"}
	repaired := verify.FsckFinding{Code: "x", Repaired: true}
	notice := verify.FsckFinding{Code: "source.unknown_entry_type", Notice: true}
	tests := []struct {
		name     string
		findings []verify.FsckFinding
		err      error
		want     int
	}{
		{"clean", nil, nil, ExitClean},
		{"only notices", []verify.FsckFinding{notice}, nil, ExitClean},
		{"all repaired", []verify.FsckFinding{repaired, repaired}, nil, ExitRepaired},
		{"repaired and left: 4, not 1|4", []verify.FsckFinding{repaired, problem}, nil, ExitProblems},
		{"left", []verify.FsckFinding{problem, notice}, nil, ExitProblems},
		{"tree locked", []verify.FsckFinding{problem}, engine.ErrTreeLocked, ExitLocked},
		{"operational", nil, os.ErrPermission, ExitOperational},
		{"usage", nil, engine.Usagef("--jobs -1"), ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := fsckReport{Trees: []verify.FsckTree{{Sessions: []verify.FsckSession{{Findings: tt.findings}}}}}
			rep = totalled(rep)
			if got := ExitCode(rep, tt.err); got != tt.want {
				t.Errorf("exit %d, want %d (tally %+v)", got, tt.want, rep.Tally())
			}
		})
	}
}

// totalled fills a hand-made report's totals the way Fsck does, through
// its JSON round trip: Fsck's totals are unexported work.
func totalled(rep fsckReport) fsckReport {
	for _, tr := range rep.Trees {
		for _, s := range tr.Sessions {
			for _, f := range s.Findings {
				switch {
				case f.Notice:
					rep.Totals.Notices++
				case f.Repaired:
					rep.Totals.Problems++
					rep.Totals.Repaired++
				default:
					rep.Totals.Problems++
					rep.Totals.Left++
				}
			}
		}
	}
	return rep
}

// TestFsckTreeLocked: another run holding the tree lock makes fsck (with
// or without --repair) exit 32 and name the holder.
func TestFsckTreeLocked(t *testing.T) {
	tr := newFsckTree(t)
	l, _, err := durable.OS.TryLockTree(ledger.TreeLockPath(tr.root))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	for _, args := range [][]string{{"fsck", tr.root}, {"fsck", "--repair", tr.root}, {"fsck", "--json", tr.root}} {
		r := pisess(t, args...)
		if r.code != ExitLocked || !strings.Contains(r.stderr+r.stdout, "pid=") {
			t.Errorf("%v: %s", args, r)
		}
	}
}

// TestFsckParallelRepair repairs a tree of differently damaged sessions
// with --jobs 4 and checks the round trip.
func TestFsckParallelRepair(t *testing.T) {
	tr := newFsckTree(t)
	dir := tr.copies(t, "a", "b", "c", "d", "e")
	if r := pisess(t, "migrate", tr.root); r.code != ExitClean {
		t.Fatalf("migrate: %s", r)
	}
	fixtures.FlipByte(t, store.SegmentPath(filepath.Join(dir, "a.v2"), 1), 300)
	if err := os.Remove(store.IndexPath(filepath.Join(dir, "b.v2"))); err != nil {
		t.Fatal(err)
	}
	appendFile(t, filepath.Join(dir, "c.jsonl"), appendedEntry)
	if err := os.Chmod(filepath.Join(dir, "d.v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	appendFile(t, store.SegmentPath(filepath.Join(dir, "e.v2"), 1), "torn")
	if code, rep, r := fsckJSON(t, tr.root, "--jobs", "4"); code != ExitProblems || rep.Totals.Left < 4 {
		t.Fatalf("fsck: exit %d [%s]\n%s", code, codes(rep), r.stderr)
	}
	if code, rep, r := fsckJSON(t, tr.root, "--repair", "--jobs", "4"); code != ExitRepaired {
		t.Fatalf("fsck --repair: exit %d [%s]\n%s", code, codes(rep), r.stderr)
	}
	if code, rep, r := fsckJSON(t, tr.root, "--jobs", "4"); code != ExitClean || rep.Totals.Classes[verify.ClassMigrated] != 6 {
		t.Fatalf("fsck after repair: exit %d [%s] %+v\n%s", code, codes(rep), rep.Totals, r.stderr)
	}
}

// TestFsckRepairWaitsAsideForLock: with --jobs 1, a session whose lock pi
// holds is waited for without holding up the sessions after it: they are
// repaired while it waits, and it is repaired once pi lets go.
func TestFsckRepairWaitsAsideForLock(t *testing.T) {
	tr := newFsckTree(t)
	dir := tr.copies(t, "a", "b", "c")
	if r := pisess(t, "migrate", tr.root); r.code != ExitClean {
		t.Fatalf("migrate: %s", r)
	}
	sidecars := map[string]string{}
	for _, n := range []string{"a", "b", "c", "s"} {
		sidecars[n] = filepath.Join(dir, n+".v2")
		if err := os.Chmod(sidecars[n], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	repaired := func(n string) bool {
		fi, err := os.Lstat(sidecars[n])
		return err == nil && fi.Mode().Perm() == 0o700
	}
	code := fixtures.WhileLockHeld(t, filepath.Join(dir, "a.jsonl.lock"), func() int {
		var out, errb bytes.Buffer
		return Main(context.Background(), []string{"pisess", "fsck", "--repair", "--jobs", "1", tr.root}, &out, &errb)
	}, func() bool { return repaired("b") && repaired("c") && repaired("s") }, func() bool { return !repaired("a") })
	if code != ExitRepaired || !repaired("a") {
		t.Fatalf("fsck --repair: exit %d, a.v2 repaired %v", code, repaired("a"))
	}
}

// TestFsckReadOnlyLeavesNoTrace: without --repair fsck creates nothing,
// not even .pisess/, in a tree that has none.
func TestFsckReadOnlyLeavesNoTrace(t *testing.T) {
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	before := fixtures.TreeDigest(t, root)
	code, rep, r := fsckJSON(t, root)
	if code != ExitClean || rep.Trees[0].Sessions[0].Class != verify.ClassUnmigrated {
		t.Fatalf("fsck of an unmigrated tree: %s", r)
	}
	if !maps.Equal(before, fixtures.TreeDigest(t, root)) {
		t.Errorf("fsck without --repair changed the tree")
	}
}

// TestFsckRefusedSourceIsANotice: a session the reference cannot migrate
// (pi keeps using its JSONL) is reported as a notice, not a problem.
func TestFsckRefusedSourceIsANotice(t *testing.T) {
	root, _ := placeSession(t, refusedSession, "r.jsonl")
	code, rep, r := fsckJSON(t, root)
	if code != ExitClean || rep.Totals.Notices != 1 {
		t.Fatalf("fsck: exit %d [%s]\n%s", code, codes(rep), r.stderr)
	}
	if f := allFindings(rep)[0]; !strings.HasPrefix(f.Code, "source.") || f.Line == 0 || f.Action != verify.ActionNone {
		t.Errorf("finding %+v: want a source.<class> notice with its line", f)
	}
}

// TestFsckSymlinkedAncestor: a sidecar under a symlinked directory cannot
// be repaired; fsck says so and what to do, and --repair leaves it.
func TestFsckSymlinkedAncestor(t *testing.T) {
	tr := newFsckTree(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(tr.root, link); err != nil {
		t.Fatal(err)
	}
	code, rep, r := fsckJSON(t, link)
	if code != ExitProblems || !hasCode(rep, verify.CodeSymlinkAncestor) {
		t.Fatalf("fsck: exit %d [%s]\n%s", code, codes(rep), r.stderr)
	}
	for _, f := range allFindings(rep) {
		if f.Code == verify.CodeSymlinkAncestor && (f.Action != verify.ActionNone || !strings.Contains(f.Repair, "cannot repair")) {
			t.Errorf("finding %+v: want no action and what to do", f)
		}
	}
	digest := fixtures.TreeDigest(t, filepath.Dir(tr.session))
	if code, rep, r := fsckJSON(t, link, "--repair"); code != ExitProblems {
		t.Fatalf("fsck --repair: exit %d [%s]\n%s", code, codes(rep), r.stderr)
	}
	if !maps.Equal(digest, fixtures.TreeDigest(t, filepath.Dir(tr.session))) {
		t.Errorf("fsck --repair touched a session under a symlinked ancestor")
	}
}

// TestFsckText checks the text report names the finding, its file and
// the repair.
func TestFsckText(t *testing.T) {
	tr := newFsckTree(t)
	if err := os.Remove(store.ManifestPath(tr.sidecar)); err != nil {
		t.Fatal(err)
	}
	r := pisess(t, "fsck", tr.root)
	if r.code != ExitProblems {
		t.Fatalf("fsck: %s", r)
	}
	// Paths in text are relative to the tree.
	rel, err := filepath.Rel(tr.root, store.ManifestPath(tr.sidecar))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[manifest.missing] " + rel + ": missing", "repair: fsck --repair: recompute the manifest",
		"1 problem(s), 0 repaired, 1 left", "run pisess fsck --repair"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("text report lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stderr, "problem(s)") {
		t.Errorf("text report wrote to stderr: %q", r.stderr)
	}
}

// installDamaged copies the damaged tree fixtures/damaged/<name> into a
// temporary tree and puts back what git does not keep: the store's empty
// directories and its private modes.
func installDamaged(tb testing.TB, name string) fsckTree {
	tb.Helper()
	root := tb.TempDir()
	fixtures.CopyTree(tb, filepath.Join("..", "fixtures", "damaged", name), root)
	_ = os.Remove(filepath.Join(root, "README"))
	dir := filepath.Join(root, "--p--")
	sidecar := filepath.Join(dir, "s.v2")
	for _, d := range store.StoreDirs {
		if err := os.MkdirAll(filepath.Join(sidecar, d), 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	fixtures.PrivateModes(tb, root)
	return fsckTree{root: root, session: filepath.Join(dir, "s.jsonl"), sidecar: sidecar}
}

// TestFsckDamagedFixtures runs the round trip over the damaged stores kept
// in fixtures/damaged/.
func TestFsckDamagedFixtures(t *testing.T) {
	for name, code := range map[string]string{
		"torn-segment-tail":       verify.CodeSegmentTorn,
		"flipped-frame-byte":      verify.CodeIndexCRC,
		"pending-rollback-intent": verify.CodeRollbackIntent,
	} {
		t.Run(name, func(t *testing.T) {
			tr := installDamaged(t, name)
			source := fixtures.SHA256File(t, tr.session)
			before := snapshot(t, tr.root)
			if c, rep, r := fsckJSON(t, tr.root); c != ExitProblems || !hasCode(rep, code) {
				t.Fatalf("fsck: exit %d [%s], want 4 and %s\n%s", c, codes(rep), code, r.stderr)
			}
			if c, rep, r := fsckJSON(t, tr.root, "--repair"); c != ExitRepaired {
				t.Fatalf("fsck --repair: exit %d [%s]\n%s", c, codes(rep), r.stderr)
			}
			if c, rep, r := fsckJSON(t, tr.root); c != ExitClean {
				t.Fatalf("fsck again: exit %d [%s]\n%s", c, codes(rep), r.stderr)
			}
			if fixtures.SHA256File(t, tr.session) != source {
				t.Errorf("the source changed")
			}
			assertNothingLost(t, tr.root, before)
		})
	}
}

func TestFsckUsage(t *testing.T) {
	if r := pisess(t, "fsck", "--jobs", "-1", t.TempDir()); r.code != ExitUsage {
		t.Errorf("fsck --jobs -1: %s", r)
	}
	if r := pisess(t, "fsck", "--json", filepath.Join(t.TempDir(), "nope")); r.code != ExitOperational {
		t.Errorf("fsck of a missing tree: %s", r)
	} else {
		checkErrorObject(t, r, ClassOperational)
	}
}

// TestFsckStaleIsNotDamage: pi marks a sidecar stale on every save, so a
// stale sidecar is a notice (exit 0); --repair still refreshes it.
func TestFsckStaleIsNotDamage(t *testing.T) {
	tr := newFsckTree(t)
	appendFile(t, tr.session, appendedEntry)
	code, rep, r := fsckJSON(t, tr.root)
	notice := false
	for _, f := range allFindings(rep) {
		notice = notice || f.Code == verify.CodeSourceStale && f.Notice
	}
	if code != ExitClean || !notice || rep.Trees[0].Sessions[0].Class != verify.ClassStale {
		t.Fatalf("fsck of a stale sidecar: exit %d [%s] class %s\n%s", code, codes(rep), rep.Trees[0].Sessions[0].Class, r.stderr)
	}
	if code, _, r := fsckJSON(t, tr.root, "--repair"); code != ExitClean {
		t.Fatalf("fsck --repair of a stale sidecar: exit %d\n%s", code, r.stderr)
	}
	if _, rep, _ := fsckJSON(t, tr.root); rep.Trees[0].Sessions[0].Class != verify.ClassMigrated {
		t.Errorf("after --repair the sidecar is %s, want migrated (refreshed)", rep.Trees[0].Sessions[0].Class)
	}
}

// TestFsckRepairsSymlinkedSidecar: migrate plans a symlinked sidecar as
// needs_repair saying fsck --repair quarantines it, and fsck --repair does
// just that: the link itself goes to the quarantine, its target is left
// untouched, and the sidecar is rebuilt from the source.
func TestFsckRepairsSymlinkedSidecar(t *testing.T) {
	root, session := placeSession(t, exampleSession, "s.jsonl")
	target := t.TempDir()
	if err := os.WriteFile(filepath.Join(target, "keep"), []byte("not pisess's"), 0o600); err != nil {
		t.Fatal(err)
	}
	sidecar := filepath.Join(filepath.Dir(session), "s.v2")
	if err := os.Symlink(target, sidecar); err != nil {
		t.Fatal(err)
	}
	r := pisess(t, "migrate", root)
	if r.code != ExitProblems || !strings.Contains(r.stdout, "fsck --repair quarantines it") {
		t.Fatalf("migrate: %s", r)
	}
	code, rep, r2 := fsckJSON(t, root, "--repair")
	if code != ExitRepaired {
		t.Fatalf("fsck --repair: exit %d [%s]\n%s", code, codes(rep), r2.stderr)
	}
	if fi, err := os.Lstat(sidecar); err != nil || !fi.IsDir() {
		t.Fatalf("no rebuilt sidecar: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "keep")); err != nil || string(b) != "not pisess's" {
		t.Error("the link's target was changed")
	}
	// The cutover displaces it, as it displaces any sidecar (issue 32 §3).
	links, _ := filepath.Glob(filepath.Join(root, ".pisess", "quarantine", rep.CorrelationID, "--p--", "s.jsonl.displaced*"))
	if len(links) != 1 {
		t.Fatalf("the link is not in the quarantine: %v", links)
	}
	if got, err := os.Readlink(links[0]); err != nil || got != target {
		t.Errorf("quarantined link points to %q (%v), want %q", got, err, target)
	}
}
