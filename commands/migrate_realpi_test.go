package commands

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"pisess/commands/engine"
	"pisess/fixtures"
	"pisess/fixtures/pi"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/verify"
)

// mcPiRefused are the scenarios of the real pi's corpus (pi.Generate) that
// the reference refuses to migrate, and the reader class pisess gives
// each: the real pi writes what the reference's typed model cannot read
// (vectors/README.md, realpi/). Every other persisted scenario migrates.
var mcPiRefused = map[string]string{
	"bash-no-exitcode":           "bad_entry",          // a bashExecution message without exitCode
	"custom-message-entries":     "unknown_entry_type", // custom_message is not in the reference model
	"custom-session-id":          "bad_session_id",     // the manifest needs a UUID
	"duplicate-header":           "unknown_entry_type", // a second session header is no entry type
	"fork-createBranchedSession": "missing_parent",     // its first kept entry names a dropped label
	"lone-surrogate":             "lone_surrogate",     // a \ud83d escape with no low surrogate
}

// TestMigrateRealPi drives the real pi end to end: its corpus is migrated
// (every session the reference accepts verifies; the others are refused
// with a line and a class); then pi appends to one migrated session, and a
// second migrated sidecar is marked dirty the way the Rust pi marks it; the
// next run reports both stale (from the fingerprint; from the dirty mark),
// refreshes them, and keeps each displaced store in the quarantine exactly
// as it was; `pisess rollback <id>` of that run puts both back byte for
// byte.
func TestMigrateRealPi(t *testing.T) {
	pi.Require(t)
	dir := t.TempDir()
	scenarios := pi.Generate(t, dir)
	ctx := context.Background()
	opt := engine.MigrateOptions{Paths: []string{dir}, Jobs: 2, LockTimeout: 10 * time.Second}
	rep, err := engine.Migrate(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]engine.SessionResult{}
	for _, s := range rep.Sessions {
		results[s.Path] = s
	}
	byName := map[string]string{}
	for _, sc := range scenarios {
		if !sc.Persisted {
			if _, ok := results[sc.Path]; ok {
				t.Errorf("%s: pi never wrote it, yet it was reported", sc.Scenario)
			}
			continue
		}
		s, ok := results[sc.Path]
		if !ok {
			t.Errorf("%s: %s not found", sc.Scenario, sc.Path)
			continue
		}
		byName[sc.Scenario] = sc.Path
		if class, refused := mcPiRefused[sc.Scenario]; refused {
			if s.Outcome != engine.OutcomeRefused || s.Error == nil || s.Error.Class != class || s.Error.Line <= 0 {
				t.Errorf("%s: %s/%s %+v, want refused (%s) with a line", sc.Scenario, s.Action, s.Outcome, s.Error, class)
			}
			if _, err := os.Lstat(discover.SidecarPath(sc.Path)); err == nil {
				t.Errorf("%s: refused, yet it has a sidecar", sc.Scenario)
			}
			continue
		}
		if s.Outcome != engine.OutcomeDone || s.Entries != uint64(sc.EntryCount) {
			t.Errorf("%s: %s/%s %d entries (pi holds %d) %+v", sc.Scenario, s.Action, s.Outcome, s.Entries, sc.EntryCount, s.Error)
			continue
		}
		mcVerified(t, sc.Path)
	}
	for _, name := range []string{"plain-chat", "branching", "large"} {
		if byName[name] == "" {
			t.Fatalf("the corpus has no %s session", name)
		}
	}

	// pi keeps working: it appends to one session (the TypeScript pi does
	// not know sidecars), and the Rust pi marks another sidecar dirty.
	appended, dirty, untouched := byName["plain-chat"], byName["branching"], byName["large"]
	appendedBefore := fixtures.TreeDigest(t, discover.SidecarPath(appended))
	if res := pi.Append(t, appended, "one more question"); !res.Written || res.SizeAfter <= res.SizeBefore {
		t.Fatalf("pi did not append: %+v", res)
	}
	fixtures.MarkDirty(t, discover.SidecarPath(dirty))
	dirtyBefore := fixtures.TreeDigest(t, discover.SidecarPath(dirty))
	untouchedBefore := fixtures.TreeDigest(t, discover.SidecarPath(untouched))

	opt.CorrelationID = "refresh-after-pi-wrote"
	// This test checks the displaced stores byte for byte and their
	// restore: keep them (by default a reproducible one is not kept).
	opt.KeepDisplaced = true
	rep, err = engine.Migrate(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Sessions {
		switch s.Path {
		case appended, dirty:
			want := "fingerprint"
			if s.Path == dirty {
				want = "dirty"
			}
			if s.Action != engine.PlanRefresh || s.Outcome != engine.OutcomeDone || !strings.Contains(s.Reason, want) {
				t.Errorf("%s: %s/%s %q, want a refresh because of the %s", filepath.Base(s.Path), s.Action, s.Outcome, s.Reason, want)
			}
			if !strings.HasPrefix(s.Displaced, ledger.Quarantine(dir, opt.CorrelationID)+string(filepath.Separator)) {
				t.Errorf("%s: displaced to %q, not into the run's quarantine", filepath.Base(s.Path), s.Displaced)
			}
			mcVerified(t, s.Path)
		default:
			if s.Outcome != engine.OutcomeSkipped && s.Outcome != engine.OutcomeRefused {
				t.Errorf("%s: %s/%s", filepath.Base(s.Path), s.Action, s.Outcome)
			}
		}
	}
	if got := mcResult(t, rep, appended); got.Entries != results[appended].Entries+1 {
		t.Errorf("the refreshed sidecar holds %d entries, want %d", got.Entries, results[appended].Entries+1)
	}
	for path, before := range map[string]map[string]string{appended: appendedBefore, dirty: dirtyBefore} {
		if !maps.Equal(before, fixtures.TreeDigest(t, mcResult(t, rep, path).Displaced)) {
			t.Errorf("%s: the displaced store in the quarantine differs from the one installed before", filepath.Base(path))
		}
	}
	if !maps.Equal(untouchedBefore, fixtures.TreeDigest(t, discover.SidecarPath(untouched))) {
		t.Error("a fresh sidecar was rewritten")
	}

	// Rolling the refresh back puts the previous sidecars back, byte for
	// byte; sources keep pi's appended entry.
	src := fixtures.SHA256File(t, appended)
	r := pisess(t, "rollback", "--json", "--tree", dir, opt.CorrelationID)
	if r.code != ExitClean {
		t.Fatalf("rollback: %s", r)
	}
	var rb rollbackReport
	if err := json.Unmarshal(detail(t, r.stdout), &rb); err != nil || len(rb.Sessions) != 2 {
		t.Fatalf("rollback report %s (%v)", r.stdout, err)
	}
	for _, s := range rb.Sessions {
		if s.Action != "rolled-back" || !s.Changed || s.Error != "" {
			t.Errorf("rollback of %s: %+v", filepath.Base(s.Session), s)
		}
	}
	if !maps.Equal(appendedBefore, fixtures.TreeDigest(t, discover.SidecarPath(appended))) {
		t.Error("rollback did not restore the sidecar pi appended past")
	}
	if !maps.Equal(dirtyBefore, fixtures.TreeDigest(t, discover.SidecarPath(dirty))) {
		t.Error("rollback did not restore the dirty sidecar")
	}
	if fixtures.SHA256File(t, appended) != src {
		t.Error("rollback changed the source")
	}
}

// mcVerified checks a session's installed sidecar: the reference's status
// calls it migrated (fresh, every check passed), it verifies against the
// source, and it breaks no acceptance rule.
func mcVerified(tb testing.TB, session string) {
	tb.Helper()
	st, err := verify.Status(session)
	if err != nil || st.Class != verify.ClassMigrated {
		tb.Errorf("%s: status %s %v %v", filepath.Base(session), st.Class, st.Findings, err)
	}
	src, err := discover.OpenSource(session)
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	rep, err := verify.AgainstSource(context.Background(), src, discover.SidecarPath(session), verify.Options{SourcePath: session})
	if err != nil || !rep.Verified() {
		tb.Errorf("%s: not verified against the source: %v %v", filepath.Base(session), rep.Findings, err)
	}
	fi, err := os.Lstat(session)
	if err != nil {
		tb.Fatal(err)
	}
	sys := fi.Sys().(*syscall.Stat_t)
	if f := verify.Acceptance(discover.SidecarPath(session), session, verify.AcceptOptions{OwnerUID: int(sys.Uid), OwnerGID: int(sys.Gid)}); len(f) > 0 {
		tb.Errorf("%s: acceptance %v", filepath.Base(session), f)
	}
}

func mcResult(tb testing.TB, rep engine.MigrateReport, path string) engine.SessionResult {
	tb.Helper()
	for _, s := range rep.Sessions {
		if s.Path == path {
			return s
		}
	}
	tb.Fatalf("%s not in the report", path)
	return engine.SessionResult{}
}
