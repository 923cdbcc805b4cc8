package commands

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/verify"
	"pisess/writers/store"
)

func verifyJSON(t *testing.T, args ...string) (int, verifyReport, result) {
	t.Helper()
	r := pisess(t, append([]string{"verify", "--json"}, args...)...)
	var rep verifyReport
	if r.code == ExitClean || r.code == ExitProblems {
		if err := json.Unmarshal(detail(t, r.stdout), &rep); err != nil {
			t.Fatalf("verify --json: %v\n%s", err, r)
		}
	}
	return r.code, rep, r
}

func TestVerifyClean(t *testing.T) {
	tr := newFsckTree(t)
	for _, p := range []string{tr.session, tr.sidecar, tr.root} {
		code, rep, r := verifyJSON(t, p)
		if code != ExitClean || rep.Verified != 1 || rep.Failed != 0 {
			t.Fatalf("verify %s: %s", p, r)
		}
		s := rep.Sessions[0]
		if !s.Flags.EntryCountMatch || !s.Flags.HashChainMatch || !s.Flags.IndexConsistent || !s.Fresh {
			t.Errorf("verify %s: %+v", p, s)
		}
		if len(s.Invariants) != len(verify.InvariantCodes) {
			t.Errorf("verify %s: %d invariants, want %d", p, len(s.Invariants), len(verify.InvariantCodes))
		}
		for _, inv := range s.Invariants {
			if !inv.Holds {
				t.Errorf("verify %s: %s does not hold: %s", p, inv.Code, inv.Detail)
			}
		}
	}
}

func TestVerifyFailures(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, tr fsckTree)
		check  func(s verify.Verdict) bool
	}{
		{"flipped frame byte", func(t *testing.T, tr fsckTree) { fixtures.FlipByte(t, segment1(tr), 200) },
			func(s verify.Verdict) bool { return !s.Flags.IndexConsistent }},
		{"segment 0644", func(t *testing.T, tr fsckTree) {
			if err := os.Chmod(segment1(tr), 0o644); err != nil {
				t.Fatal(err)
			}
		}, func(s verify.Verdict) bool {
			return len(s.Acceptance) > 0 && s.Acceptance[0].Code == verify.CodeMode
		}},
		{"index removed", func(t *testing.T, tr fsckTree) {
			if err := os.Remove(store.IndexPath(tr.sidecar)); err != nil {
				t.Fatal(err)
			}
		}, func(s verify.Verdict) bool { return !s.Flags.IndexConsistent }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newFsckTree(t)
			tt.damage(t, tr)
			code, rep, r := verifyJSON(t, tr.session)
			if code != ExitProblems || rep.Failed != 1 || !tt.check(rep.Sessions[0]) {
				t.Fatalf("verify: %s", r)
			}
			if text := pisess(t, "verify", tr.session); text.code != ExitProblems || !strings.Contains(text.stdout, "FAILED") {
				t.Errorf("verify (text): %s", text)
			}
		})
	}
}

func TestVerifyUsageAndErrors(t *testing.T) {
	if r := pisess(t, "verify"); r.code != ExitUsage {
		t.Errorf("verify with no PATH: %s", r)
	}
	if r := pisess(t, "verify", "--json", filepath.Join(t.TempDir(), "nope.jsonl")); r.code != ExitOperational {
		t.Errorf("verify of a missing path: %s", r)
	} else {
		checkErrorObject(t, r, ClassOperational)
	}
	// A session with no sidecar: named, it fails; met in a tree, skipped.
	root, session := placeSession(t, exampleSession, "s.jsonl")
	if code, _, r := verifyJSON(t, session); code != ExitProblems {
		t.Errorf("verify of an unmigrated session: %s", r)
	}
	if code, rep, r := verifyJSON(t, root); code != ExitClean || !rep.Sessions[0].Skipped {
		t.Errorf("verify of a tree with an unmigrated session: %s", r)
	}
}

// TestVerifyStaleIsNotAFailure: a whole sidecar whose source pi has written
// since is stale: reported as such, exit 0, not FAILED.
func TestVerifyStaleIsNotAFailure(t *testing.T) {
	tr := newFsckTree(t)
	appendFile(t, tr.session, appendedEntry)
	code, rep, r := verifyJSON(t, tr.session)
	if code != ExitClean || rep.Failed != 0 || rep.Stale != 1 || !rep.Sessions[0].Stale || rep.Sessions[0].Fresh {
		t.Fatalf("verify of a stale sidecar: %s", r)
	}
	text := pisess(t, "verify", tr.session)
	if text.code != ExitClean || strings.Contains(text.stdout, "FAILED") || !strings.Contains(text.stdout, "stale, pi will not use it until refreshed") {
		t.Errorf("verify (text): %s", text)
	}
	// Damage on top of staleness is still a failure.
	fixtures.FlipByte(t, segment1(tr), 200)
	if code, rep, r := verifyJSON(t, tr.session); code != ExitProblems || rep.Failed != 1 {
		t.Errorf("verify of a stale and damaged sidecar: %s", r)
	}
}
