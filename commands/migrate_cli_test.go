package commands

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/fixtures/trees"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/writers/durable"
)

// mcReport is the --json report of pisess migrate, decoded.
type mcReport struct {
	CorrelationID string      `json:"correlationId"`
	DryRun        bool        `json:"dryRun"`
	Sessions      []mcSession `json:"sessions"`
	Totals        struct {
		Sessions, Migrated, Refreshed, Verified, Skipped, NeedsRepair, Refused, Busy, Failed int
	} `json:"totals"`
}

type mcSession struct {
	Path         string `json:"path"`
	SourceFormat string `json:"sourceFormat"`
	Action       string `json:"action"`
	Reason       string `json:"reason"`
	Outcome      string `json:"outcome"`
	Entries      uint64 `json:"entries"`
	Bytes        uint64 `json:"bytes"`
	Verification *struct {
		EntryCountMatch bool `json:"entryCountMatch"`
		HashChainMatch  bool `json:"hashChainMatch"`
		IndexConsistent bool `json:"indexConsistent"`
	} `json:"verification"`
	Error *struct {
		Class   string `json:"class"`
		Message string `json:"message"`
		Line    int64  `json:"line"`
	} `json:"error"`
}

// mcMigrate runs `pisess migrate --json args...` with the vectors' clock
// and decodes the report, after checking its shape member by member.
func mcMigrate(tb testing.TB, args ...string) (result, mcReport) {
	tb.Helper()
	tb.Setenv(EnvClock, fixedClock)
	r := pisess(tb, append([]string{"migrate", "--json"}, args...)...)
	obj := r.jsonObject(tb)
	if _, isErr := obj["error"]; isErr {
		return r, mcReport{}
	}
	mcShape(tb, obj)
	var rep mcReport
	if err := json.Unmarshal(detail(tb, r.stdout), &rep); err != nil {
		tb.Fatalf("report: %v", err)
	}
	return r, rep
}

// mcShape checks the members the issue names: correlationId, dryRun,
// sessions[] with path, sourceFormat, action, reason, entries, bytes,
// verification (sessions that were verified) and error{class, message}
// (sessions with a problem), and totals.
func mcShape(tb testing.TB, obj map[string]any) {
	tb.Helper()
	if id, ok := obj["correlationId"].(string); !ok || id == "" {
		tb.Errorf("correlationId %v", obj["correlationId"])
	}
	if _, ok := obj["dryRun"].(bool); !ok {
		tb.Errorf("dryRun %v", obj["dryRun"])
	}
	if _, ok := obj["totals"].(map[string]any); !ok {
		tb.Errorf("totals %v", obj["totals"])
	}
	sessions, ok := obj["sessions"].([]any)
	if !ok {
		tb.Fatalf("sessions %v", obj["sessions"])
	}
	for _, x := range sessions {
		s, _ := x.(map[string]any)
		for _, k := range []string{"path", "sourceFormat", "action", "reason", "outcome"} {
			if v, ok := s[k].(string); !ok || v == "" {
				tb.Errorf("session %v: %s is %v", s["path"], k, s[k])
			}
		}
		for _, k := range []string{"entries", "bytes"} {
			if _, ok := s[k].(float64); !ok {
				tb.Errorf("session %v: %s is %v", s["path"], k, s[k])
			}
		}
		switch s["outcome"] {
		case "done", "verified":
			v, ok := s["verification"].(map[string]any)
			if !ok {
				tb.Errorf("session %v: no verification", s["path"])
				continue
			}
			for _, k := range []string{"entryCountMatch", "hashChainMatch", "indexConsistent"} {
				if v[k] != true {
					tb.Errorf("session %v: verification.%s is %v", s["path"], k, v[k])
				}
			}
		case "refused", "failed", "busy":
			e, ok := s["error"].(map[string]any)
			if !ok {
				tb.Errorf("session %v: no error object", s["path"])
				continue
			}
			for _, k := range []string{"class", "message"} {
				if v, ok := e[k].(string); !ok || v == "" {
					tb.Errorf("session %v: error.%s is %v", s["path"], k, e[k])
				}
			}
		}
	}
}

func (r mcReport) session(tb testing.TB, path string) mcSession {
	tb.Helper()
	for _, s := range r.Sessions {
		if s.Path == path {
			return s
		}
	}
	tb.Fatalf("%s not in the report", path)
	return mcSession{}
}

// TestMigrateCLIVectors runs `pisess migrate --json` over a tree of every
// vector session: exit 4 (the reference refuses some), every migratable
// session migrated byte-identical to the reference, every refused one
// reported with its line and the reference's words, sources unchanged;
// the second run changes nothing (and still exits 4 for the refusals).
func TestMigrateCLIVectors(t *testing.T) {
	dir := t.TempDir()
	vs := trees.Copy(t, dir, trees.Without(trees.Vectors(t), "accept/rollover"))
	sources := trees.Digests(t, vs)
	r, rep := mcMigrate(t, "--jobs", "2", dir)
	if r.code != ExitClean {
		t.Fatalf("exit %d, want %d (refusals are notices)\n%s", r.code, ExitClean, r.stderr)
	}
	if rep.DryRun || len(rep.Sessions) != len(vs) {
		t.Fatalf("dry run %v, %d sessions for %d vectors", rep.DryRun, len(rep.Sessions), len(vs))
	}
	refused := 0
	for _, v := range vs {
		s := rep.session(t, v.Path)
		if v.HasReference() {
			if s.Outcome != "done" || s.Action != "migrate" || s.SourceFormat != "jsonl_v3" || s.Error != nil || (s.Entries == 0) != (v.Name == "accept/header_only") {
				t.Errorf("%s: %+v", v.Name, s)
				continue
			}
			trees.SameStore(t, v.Sidecar(), v.Reference)
			evs, err := ledger.ReadStoreEvents(v.Sidecar())
			if err != nil || len(evs) != 5 {
				t.Errorf("%s: store ledger %d events (%v)", v.Name, len(evs), err)
			}
			for _, ev := range evs {
				if ev.CorrelationID != rep.CorrelationID || ev.TargetPath != v.Sidecar() {
					t.Errorf("%s: store ledger event %+v, run %s", v.Name, ev, rep.CorrelationID)
				}
			}
			continue
		}
		refused++
		if s.Outcome != "refused" || s.Action != "refuse" || s.Error == nil || s.Error.Line <= 0 {
			t.Errorf("%s: %+v", v.Name, s)
			continue
		}
		if rf := v.Refused; rf != nil && rf.Error == "entry" && (s.Error.Line != rf.Line || !strings.Contains(s.Reason, rf.Detail) || !strings.Contains(s.Error.Message, rf.Detail)) {
			t.Errorf("%s: line %d reason %q, the reference: line %d %q", v.Name, s.Error.Line, s.Reason, rf.Line, rf.Detail)
		}
		if _, err := os.Lstat(v.Sidecar()); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: refused, yet %s exists", v.Name, v.Sidecar())
		}
	}
	if rep.Totals.Refused != refused || rep.Totals.Migrated != len(vs)-refused || rep.Totals.Sessions != len(vs) {
		t.Errorf("totals %+v", rep.Totals)
	}
	trees.SameDigests(t, sources, trees.Digests(t, vs))

	before := fixtures.TreeDigest(t, dir)
	r, again := mcMigrate(t, dir)
	if r.code != ExitClean || again.Totals.Skipped != len(vs)-refused || again.Totals.Migrated+again.Totals.Refreshed != 0 {
		t.Errorf("re-run: exit %d totals %+v", r.code, again.Totals)
	}
	if r, _ := mcMigrate(t, "--strict", dir); r.code != ExitProblems {
		t.Errorf("--strict with refusals: exit %d, want %d", r.code, ExitProblems)
	}
	after := fixtures.TreeDigest(t, dir)
	for k, v := range before {
		if k != ".pisess/journal.jsonl" && after[k] != v {
			t.Errorf("the re-run changed %s", k)
		}
	}
	if len(after) != len(before) {
		t.Errorf("the re-run added or removed paths: %d before, %d after", len(before), len(after))
	}
}

// TestMigrateCLIRollover: exit 0 when every session migrates, with
// --max-segment-bytes 4096 reproducing the rollover vector's 14 segments
// byte for byte, --correlation-id setting the run's id, and the text
// report naming it; a second run has nothing to do (exit 0).
func TestMigrateCLIRollover(t *testing.T) {
	dir := t.TempDir()
	v := trees.Copy(t, dir, trees.Only(trees.Vectors(t, trees.Accept), "accept/rollover"))[0]
	r, rep := mcMigrate(t, "--max-segment-bytes", "4096", "--correlation-id", "cron.2026-01-01:nightly", dir)
	if r.code != ExitClean || rep.CorrelationID != "cron.2026-01-01:nightly" || rep.Totals.Migrated != 1 {
		t.Fatalf("exit %d, report %+v\n%s", r.code, rep, r.stderr)
	}
	trees.SameStore(t, v.Sidecar(), v.Reference)
	t.Setenv(EnvClock, fixedClock)
	text := pisess(t, "migrate", dir)
	if text.code != ExitClean || !strings.Contains(text.stdout, "up to date") || !strings.Contains(text.stdout, "correlation id") {
		t.Errorf("text re-run: %s", text)
	}
}

// TestMigrateCLIUsage: a segment size over 64 MiB and a malformed
// correlation id are usage errors (16), reported as a JSON error object,
// and nothing is written in the tree.
func TestMigrateCLIUsage(t *testing.T) {
	dir := t.TempDir()
	trees.Copy(t, dir, trees.Only(trees.Vectors(t, trees.Accept), "accept/header_only"))
	before := fixtures.TreeDigest(t, dir)
	for _, args := range [][]string{
		{"--max-segment-bytes", "67108865"},
		{"--max-segment-bytes", "-1"},
		{"--correlation-id", "bad id!"},
		{"--correlation-id", "short"},
		{"--jobs", "-2"},
		{"--lock-timeout", "soon"},
	} {
		r, _ := mcMigrate(t, append(args, dir)...)
		if r.code != ExitUsage {
			t.Errorf("%v: %s", args, r)
			continue
		}
		checkErrorObject(t, r, ClassUsage)
	}
	if d := fixtures.TreeDigest(t, dir); len(d) != len(before) {
		t.Errorf("a usage error wrote in the tree: %d paths before, %d after", len(before), len(d))
	}
}

// TestMigrateCLIHoldTreeLock is not a test: re-executed by
// TestMigrateCLITreeLocked with PISESS_TEST_HOLD_TREE_LOCK set, it takes the
// tree lock the way a pisess run does, says "locked", and holds it until
// its stdin closes.
func TestMigrateCLIHoldTreeLock(t *testing.T) {
	tree := os.Getenv("PISESS_TEST_HOLD_TREE_LOCK")
	if tree == "" {
		t.Skip("helper process for TestMigrateCLITreeLocked")
	}
	if err := durable.OS.MkdirPrivate(filepath.Join(tree, discover.PisessDir)); err != nil {
		t.Fatal(err)
	}
	l, _, err := durable.OS.TryLockTree(ledger.TreeLockPath(tree))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	l.Unlock()
}

// TestMigrateCLITreeLocked: while another process holds the tree lock,
// migrate exits 32 and names the holder (its pid), in the JSON error object
// and in text; nothing is migrated. Once the holder is gone, it runs.
func TestMigrateCLITreeLocked(t *testing.T) {
	dir := t.TempDir()
	v := trees.Copy(t, dir, trees.Only(trees.Vectors(t, trees.Accept), "accept/tricky"))[0]
	cmd := exec.Command(os.Args[0], "-test.run=^TestMigrateCLIHoldTreeLock$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PISESS_TEST_HOLD_TREE_LOCK="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "locked" {
				ready <- true
				io.Copy(io.Discard, stdout)
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("the helper process did not take the tree lock")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the helper process did not take the tree lock in 30s")
	}
	holder := fmt.Sprintf("pid=%d", cmd.Process.Pid)

	r, _ := mcMigrate(t, dir)
	if r.code != ExitLocked {
		t.Fatalf("want exit %d: %s", ExitLocked, r)
	}
	checkErrorObject(t, r, ClassLocked)
	if !strings.Contains(r.stdout, holder) {
		t.Errorf("the error does not name the holder %s: %s", holder, r.stdout)
	}
	text := pisess(t, "migrate", dir)
	if text.code != ExitLocked || !strings.Contains(text.stderr, holder) {
		t.Errorf("text: %s", text)
	}
	if _, err := os.Lstat(v.Sidecar()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("migrated although the tree was locked (%v)", err)
	}

	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	if r, rep := mcMigrate(t, dir); r.code != ExitClean || rep.Totals.Migrated != 1 {
		t.Errorf("after the holder left: %s", r)
	}
}

// TestMigrateCLIBusy: a session whose lock pi holds past --lock-timeout is
// reported busy (exit 4), the others migrate.
func TestMigrateCLIBusy(t *testing.T) {
	dir := t.TempDir()
	vs := trees.Copy(t, dir, trees.Only(trees.Vectors(t, trees.Accept), "accept/tricky", "accept/idless_entries"))
	lock, err := durable.OS.LockFile(context.Background(), discover.LockPath(vs[1].Path), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	r, rep := mcMigrate(t, "--lock-timeout", "100ms", dir)
	if r.code != ExitProblems {
		t.Fatalf("exit %d: %s", r.code, r)
	}
	if s := rep.session(t, vs[1].Path); s.Outcome != "busy" || s.Error == nil || s.Error.Class != "busy" {
		t.Errorf("held session: %+v", s)
	}
	if s := rep.session(t, vs[0].Path); s.Outcome != "done" {
		t.Errorf("free session: %+v", s)
	}
	if rep.Totals.Busy != 1 || rep.Totals.Migrated != 1 {
		t.Errorf("totals %+v", rep.Totals)
	}
}
