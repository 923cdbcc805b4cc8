//go:build failpoints

package commands

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCrashSourceFaults injects an error into reading one session of two
// (PISESS_SOURCE_FAULT, readers/discover, failpoints builds: this test
// runs with the crash harness, `go test -tags failpoints -run Crash`):
// EMFILE and EIO on the reader's open, and on discovery's read of the
// header. Each is a failure of the run that met it — the session failed,
// counted, exit 4, nothing in refused.json — and the next run, without
// the fault, migrates it. issue 32 §2: fails on 65304d8 (the session is
// refused with class io, exit 0, cached and never read again while the
// file is unchanged).
func TestCrashSourceFaults(t *testing.T) {
	for _, tc := range []struct{ fault, says string }{
		{"open:b.jsonl:EMFILE", "too many open files"}, {"open:b.jsonl:EIO", "input/output error"},
		{"sniff:b.jsonl:EIO", "input/output error"}, {"sniff:b.jsonl:EMFILE", "too many open files"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			root, _ := placeSession(t, exampleSession, "a.jsonl")
			b := filepath.Join(root, "--p--", "b.jsonl")
			if err := os.WriteFile(b, exampleBytes(t), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PISESS_SOURCE_FAULT", tc.fault)
			r := runJSON[jsonMigrate](t, "migrate", root)
			os.Unsetenv("PISESS_SOURCE_FAULT")
			checkRunFailure(t, root, b, r, tc.says)
			if outcome, _, _ := outcomeOf(r, filepath.Join(root, "--p--", "a.jsonl")); outcome != "done" {
				t.Errorf("a.jsonl, never faulted: %s", outcome)
			}
			checkMigratedNow(t, root, b)
		})
	}
}
