//go:build failpoints

package commands

import (
	"strings"
	"testing"

	"pisess/commands/engine"
)

// TestCrashHealMigrate (issue 12, item 9): `pisess migrate --jobs 2` is
// killed with SIGKILL mid-run at points that leave staging or backup
// directories (and its tree lock's holder text); the next plain migrate,
// as cron runs it, takes the dead run's lock over, repairs the leftovers
// itself (journaled under a heal run id) and converges: exit 0, every
// session migrated or fresh, no leftover, and one more run changes nothing.
func TestCrashHealMigrate(t *testing.T) {
	bin, base := crashSetup(t)
	tr := newCrashTree(t, bin, base, "heal", func(tr *crashTree) {
		tr.makeStale(t)
		tr.snapshotSidecars(t)
	})
	leftBehind := 0
	for _, fp := range []string{"engine.after-stage", "engine.before-verify", "engine.after-verify", "engine.before-cutover",
		"rollback.after-backup-rename", "rollback.before-install-rename", "store.before-seal"} {
		for _, n := range []int{1, 2, 3} {
			p := failpointAt(fp, n)
			t.Run(p.name, func(t *testing.T) {
				tr.reset(t)
				args := tr.migrateArgs("run-crash-heal")
				for i, a := range args {
					if a == "--jobs" {
						args[i+1] = "2"
					}
				}
				out := tr.run(t, p.env, args...)
				if !out.killed {
					t.Skipf("not reached: %s", out)
				}
				left := tr.leftovers(t)
				if len(left) > 0 {
					leftBehind++
				}
				rep, again := tr.migrate(t, "")
				if again.code != ExitClean {
					t.Fatalf("the run after the kill did not converge: %s", again)
				}
				if len(left) > 0 && len(rep.Healed) == 0 {
					t.Errorf("leftovers %v, but the run reports no heal", left)
				}
				for _, s := range rep.Sessions {
					if s.Outcome != engine.OutcomeDone && s.Outcome != engine.OutcomeSkipped {
						t.Errorf("%s: %s/%s %s", s.Path, s.Action, s.Outcome, s.Reason)
					}
					if strings.Contains(s.Reason+strings.Join(s.Notes, " "), "fsck --repair") {
						t.Errorf("%s still sends the operator to fsck --repair: %s %v", s.Path, s.Reason, s.Notes)
					}
				}
				if l := tr.leftovers(t); len(l) > 0 {
					t.Errorf("leftovers after the healing run: %v", l)
				}
				tr.checkConverged(t)
			})
		}
	}
	if leftBehind == 0 {
		t.Fatal("no kill left a staging or backup directory: the test no longer exercises the heal")
	}
	t.Logf("%d kills left staging/backup directories, each healed by the next run", leftBehind)
}
