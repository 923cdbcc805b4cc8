package engine

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/ledger"
	"pisess/readers/jsonl"
	"pisess/writers/durable"
	"pisess/writers/upgrade"
)

const (
	upgradeV1 = `{"type":"session","id":"s1","timestamp":"2025-06-01T00:00:00.000Z","cwd":"/x"}
{"type":"message","timestamp":"2025-06-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}
{"type":"model_change","timestamp":"2025-06-01T00:00:02.000Z","provider":"anthropic","modelId":"m"}
`
	upgradeV2 = `{"type":"session","version":2,"id":"s2","timestamp":"2026-02-01T00:00:00.000Z","cwd":"/p"}
{"type":"message","id":"aaaa0003","parentId":null,"timestamp":"2026-02-01T00:00:01.000Z","message":{"role":"hookMessage","customType":"ext","content":"hi","display":true,"timestamp":1}}
`
	upgradeV3 = `{"type":"session","version":3,"id":"s3","timestamp":"2026-02-01T00:00:00.000Z","cwd":"/p"}
`
	upgradeBroken = `{"type":"session","id":"s4","timestamp":"2025-06-01T00:00:00.000Z","cwd":"/x"}
{"type":"message",
`
)

// upgradeFixture writes a tree with one session of each kind.
func upgradeFixture(t *testing.T) (tree string, files map[string]string) {
	t.Helper()
	tree = t.TempDir()
	files = map[string]string{}
	for name, content := range map[string]string{"v1": upgradeV1, "v2": upgradeV2, "v3": upgradeV3, "broken": upgradeBroken,
		"bom": "\ufeff\n" + upgradeV1, "notes": "not a session\n"} {
		p := filepath.Join(tree, "--x--", name+".jsonl")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		files[name] = p
	}
	return tree, files
}

func statuses(rep UpgradeReport) map[string]upgrade.Status {
	out := map[string]upgrade.Status{}
	for _, f := range rep.Files {
		out[filepath.Base(f.Path)] = f.Status
	}
	return out
}

func TestUpgradeRun(t *testing.T) {
	tree, files := upgradeFixture(t)
	ctx := context.Background()
	before := fixtures.TreeDigest(t, tree)

	dry, err := Upgrade(ctx, UpgradeOptions{Paths: []string{tree}, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	// bom.jsonl is a session to pi, not to the reference (discovery skips
	// it); notes.jsonl is no session at all and is only listed as skipped.
	want := map[string]upgrade.Status{"v1.jsonl": upgrade.StatusPlanned, "v2.jsonl": upgrade.StatusPlanned,
		"v3.jsonl": upgrade.StatusCurrent, "broken.jsonl": upgrade.StatusRefused, "bom.jsonl": upgrade.StatusPlanned}
	if got := statuses(dry); !maps.Equal(got, want) {
		t.Fatalf("dry run: %v, want %v", got, want)
	}
	if dry.Tally().Left() != 1 || len(dry.Skipped) != 1 || filepath.Base(dry.Skipped[0].Path) != "notes.jsonl" {
		t.Errorf("dry run tally %+v, skipped %+v", dry.Tally(), dry.Skipped)
	}
	if after := fixtures.TreeDigest(t, tree); !maps.Equal(before, after) {
		t.Fatalf("the dry run wrote in the tree: %v → %v", before, after)
	}

	const cid = "upgrade-run-0001"
	rep, err := Upgrade(ctx, UpgradeOptions{Paths: []string{tree}, CorrelationID: cid, LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want["v1.jsonl"], want["v2.jsonl"], want["bom.jsonl"] = upgrade.StatusUpgraded, upgrade.StatusUpgraded, upgrade.StatusUpgraded
	if got := statuses(rep); !maps.Equal(got, want) {
		t.Fatalf("run: %v, want %v", got, want)
	}
	if rep.Tally().Left() != 1 || rep.Totals.Upgraded != 3 {
		t.Errorf("tally %+v totals %+v", rep.Tally(), rep.Totals)
	}
	for i, f := range rep.Files {
		if f.Status == upgrade.StatusUpgraded && dryFile(dry, f.Path).NewSHA256 != f.NewSHA256 {
			t.Errorf("file %d: the dry run announced other bytes", i)
		}
	}
	for _, name := range []string{"v1", "v2", "bom"} {
		src, err := jsonl.Open(files[name], jsonl.Options{})
		if err != nil {
			t.Errorf("%s: the reference's reader refuses the upgrade: %v", name, err)
			continue
		}
		src.Close()
	}

	// Journal: one upgraded note per upgraded file, naming a quarantine
	// copy that holds the original bytes.
	j, err := ledger.OpenJournal(tree)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := j.Records(cid)
	if err != nil {
		t.Fatal(err)
	}
	originals := map[string]string{files["v1"]: upgradeV1, files["v2"]: upgradeV2, files["bom"]: "\ufeff\n" + upgradeV1}
	// Bracketed by the run's start and end records (ledger.RunRecord).
	if len(recs) != 5 || recs[0].Run == nil || recs[0].Run.Command != "upgrade" || recs[4].Run == nil || recs[4].Run.Totals["upgraded"] != 3 {
		t.Fatalf("journal: %d records, want 3 and the run's start and end: %+v", len(recs), recs)
	}
	for _, r := range recs[1:4] {
		n := r.Note
		if n == nil || n.Kind != ledger.NoteUpgraded || n.SHA256 == "" || n.NewSHA256 == "" {
			t.Fatalf("record %+v", r)
		}
		if got, _ := os.ReadFile(n.QuarantinePath); string(got) != originals[n.Session] {
			t.Errorf("%s: quarantine copy differs from the original", n.Session)
		}
		if want := ledger.QuarantinePath(tree, cid, filepath.Join("--x--", filepath.Base(n.Session)), upgrade.QuarantineKind); n.QuarantinePath != want {
			t.Errorf("quarantine path %s, want %s", n.QuarantinePath, want)
		}
	}

	// A second run has nothing to do and records nothing.
	again, err := Upgrade(ctx, UpgradeOptions{Paths: []string{tree}, CorrelationID: "upgrade-run-0002"})
	if err != nil {
		t.Fatal(err)
	}
	want["v1.jsonl"], want["v2.jsonl"], want["bom.jsonl"] = upgrade.StatusCurrent, upgrade.StatusCurrent, upgrade.StatusCurrent
	if got := statuses(again); !maps.Equal(got, want) {
		t.Errorf("second run: %v", got)
	}
	if recs, _ := j.Records("upgrade-run-0002"); len(recs) != 0 {
		t.Errorf("second run journaled %d records", len(recs))
	}

	// The rollback of the run restores the originals byte for byte.
	rb, err := rollbackTree(ctx, tree, cid, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rollbackProblems(rb) != 0 {
		t.Fatalf("rollback: %+v", rb)
	}
	for p, content := range originals {
		if got, _ := os.ReadFile(p); string(got) != content {
			t.Errorf("%s not restored:\n%s", p, got)
		}
	}
}

func dryFile(rep UpgradeReport, path string) upgrade.Result {
	for _, f := range rep.Files {
		if f.Path == path {
			return f
		}
	}
	return upgrade.Result{}
}

func TestUpgradeBusyAndNamedFiles(t *testing.T) {
	tree, files := upgradeFixture(t)
	held, err := durable.OS.LockFile(context.Background(), files["v1"]+".lock", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	notSession := filepath.Join(tree, "--x--", "notes.jsonl")
	if err := os.WriteFile(notSession, []byte("just text\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := Upgrade(context.Background(), UpgradeOptions{Paths: []string{files["v1"], files["v2"], notSession},
		LockTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// A named file that is not a session is a notice, as in every command.
	want := map[string]upgrade.Status{"v1.jsonl": upgrade.StatusBusy, "v2.jsonl": upgrade.StatusUpgraded}
	if got := statuses(rep); !maps.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	if len(rep.Skipped) != 1 || rep.Skipped[0].Path != notSession {
		t.Errorf("the named non-session is not reported: %+v", rep.Skipped)
	}
	if rep.Tally().Left() != 1 {
		t.Errorf("tally %+v", rep.Tally())
	}
	if got, _ := os.ReadFile(files["v1"]); string(got) != upgradeV1 {
		t.Errorf("busy file changed")
	}
	// Only the named files: v3 and broken were not looked at.
	if _, err := os.Stat(files["broken"] + ".lock"); !os.IsNotExist(err) {
		t.Errorf("an unnamed session was opened")
	}
}

// TestUpgradeWaitsForLockedLast: a session pi holds locked is waited for
// after the others, which it used to hold up for up to --lock-timeout; the
// report keeps the tree's order.
func TestUpgradeWaitsForLockedLast(t *testing.T) {
	tree, files := upgradeFixture(t)
	upgraded := func(p string) bool {
		b, err := os.ReadFile(p)
		header, _, _ := strings.Cut(string(b), "\n")
		return err == nil && strings.Contains(header, `"version":3`)
	}
	type result struct {
		rep UpgradeReport
		err error
	}
	r := fixtures.WhileLockHeld(t, files["v1"]+".lock", func() result {
		rep, err := Upgrade(context.Background(), UpgradeOptions{Paths: []string{tree}, LockTimeout: 30 * time.Second})
		return result{rep, err}
	}, func() bool { return upgraded(files["v2"]) }, func() bool { return !upgraded(files["v1"]) })
	if r.err != nil {
		t.Fatal(r.err)
	}
	if st := statuses(r.rep); st["v1.jsonl"] != upgrade.StatusUpgraded || st["v2.jsonl"] != upgrade.StatusUpgraded || !upgraded(files["v1"]) {
		t.Fatalf("%v", st)
	}
	order := []string{}
	for _, f := range r.rep.Files {
		order = append(order, filepath.Base(f.Path))
	}
	if slices.Index(order, "v1.jsonl") > slices.Index(order, "v2.jsonl") {
		t.Errorf("report out of the tree's order: %v", order)
	}
}

func TestUpgradeUsage(t *testing.T) {
	tree, _ := upgradeFixture(t)
	for _, opt := range []UpgradeOptions{
		{Paths: []string{tree}, CorrelationID: "bad id!"},
		{Paths: []string{tree}, LockTimeout: -time.Second},
	} {
		_, err := Upgrade(context.Background(), opt)
		var u *UsageError
		if !errors.As(err, &u) {
			t.Errorf("%+v: %v, want a usage error", opt, err)
		}
	}
}
