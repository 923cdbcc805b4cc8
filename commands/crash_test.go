//go:build failpoints

package commands

// Crash consistency of migrate, rollback and fsck --repair (issues 7 and 8,
// STYLE.md §6): pisess, built with -tags failpoints, is SIGKILLed at every
// hit of every failpoint durable.KnownFailpoints lists (a new failpoint is
// tested for free) and after evenly spaced byte counts; after each kill the
// tree must hold no loss and no sidecar pi would misread, and re-running
// must converge. The helpers are in crash_helpers_test.go.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"pisess/fixtures"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/durable"
)

// crashMigrateMinKills is the least number of kill points of the migrate
// test (issue 7: "at least 200 kill points across a tree").
const crashMigrateMinKills = 200

// crashTornKills is how many byte counts the rollback and fsck tests kill
// at (PISESS_KILL_AFTER_BYTES), evenly spaced over what a run writes.
const crashTornKills = 20

// crashMaxHits is how many consecutive hits of one failpoint are tried
// before sampling the rest (crashKills).
const crashMaxHits = 128

func crashSetup(t *testing.T) (bin, base string) {
	t.Helper()
	if !durable.FailpointsEnabled {
		t.Skip("needs -tags failpoints")
	}
	if testing.Short() {
		t.Skip("kills hundreds of pisess children")
	}
	return fixtures.BuildBinary(t, "failpoints"), crashBaseDir(t)
}

// crashMustReach fails the test for each name the scenario never reached:
// the tree is built so that it passes them all.
func crashMustReach(t *testing.T, hits map[string]int, names ...string) {
	t.Helper()
	for _, n := range names {
		if hits[n] == 0 {
			t.Errorf("failpoint %s was never reached: the scenario no longer exercises it", n)
		}
	}
}

// crashLogHits logs the hits per failpoint and the names never reached.
func crashLogHits(t *testing.T, hits map[string]int) {
	t.Helper()
	var reached, not []string
	for _, n := range durable.KnownFailpoints() {
		if hits[n] > 0 {
			reached = append(reached, n+"@"+strconv.Itoa(hits[n]))
		} else {
			not = append(not, n)
		}
	}
	sort.Strings(reached)
	t.Logf("reached (last hit tried): %s", strings.Join(reached, " "))
	t.Logf("not reached: %s", strings.Join(not, " "))
}

// TestCrashMigrate kills `pisess migrate --jobs 1` over a tree of six
// sessions, one of them stale (so the refresh and displace path runs), at
// every failpoint hit and at evenly spaced byte counts; after each kill
// checkAfterKill, then converge (re-run, fsck --repair only where migrate
// names it, a third run that changes nothing).
func TestCrashMigrate(t *testing.T) {
	bin, base := crashSetup(t)
	pool := crashPool(t, bin, base, "migrate", func(tr *crashTree) {
		tr.makeStale(t)
		tr.snapshotSidecars(t)
	})
	sc := crashScenario{
		args: func(tr *crashTree) []string { return tr.migrateArgs("run-crash-migrate") },
		check: func(t *testing.T, tr *crashTree, p crashPoint) []string {
			tr.checkAfterKill(t)
			return tr.converge(t)
		},
		done: func(t *testing.T, tr *crashTree, out crashOut) {
			if out.code != ExitClean {
				t.Fatalf("the unkilled run: %s", out)
			}
			tr.checkConverged(t)
		},
		doneCode: ExitClean,
	}
	named, hits := crashKills(t, pool, sc, crashMaxHits)
	crashLogHits(t, hits)
	crashMustReach(t, hits,
		"engine.before-stage", "engine.after-stage", "engine.before-verify", "engine.after-verify",
		"engine.before-source-state", "engine.after-source-state", "engine.before-cutover", "engine.after-cutover",
		"engine.after-completed", "engine.before-discards", "engine.after-discards",
		"rollback.before-backup-rename", "rollback.after-backup-rename", "rollback.before-install-rename",
		"rollback.after-install-rename", "rollback.before-quarantine-backup", "rollback.after-quarantine-backup",
		"rollback.after-displaced-note", "engine.after-staging-seal", "durable.before-sync", "durable.before-rename",
		"rollback.before-mark-dirty", "rollback.after-mark-dirty",
		"rollback.before-in-place-record", "rollback.after-in-place-record", "rollback.after-in-place-clean")

	// Torn writes: kill after n bytes, n evenly spaced over what a whole
	// run writes, enough of them for the 200 kill points.
	torn, total := crashTornWrites(t, pool, sc, max(60, crashMigrateMinKills-named))
	t.Logf("migrate: %d kill points: %d at named failpoints, %d after n bytes (of about %d a run writes)", named+torn, named, torn, total)
	if named+torn < crashMigrateMinKills {
		t.Errorf("only %d kill points, want at least %d", named+torn, crashMigrateMinKills)
	}
}

// crashNotRolledBack are the paths a rollback leaves as they are: the
// tree's own .pisess (journal, quarantine, lock) and pi's session lock
// files, which pisess creates and never deletes (durable.Lock: removing
// one while someone waits on it would let two holders in).
func crashNotRolledBack(rel string) bool {
	return rel == discover.PisessDir || strings.HasPrefix(rel, discover.PisessDir+"/") || strings.HasSuffix(rel, ".jsonl.lock")
}

// crashRollbackReport decodes the report of `pisess rollback --json`.
func crashRollbackReport(tb testing.TB, out crashOut) rollbackReport {
	tb.Helper()
	var rep rollbackReport
	if err := json.Unmarshal(detail(tb, out.stdout), &rep); err != nil {
		tb.Fatalf("rollback --json printed no report (%v): %s", err, out)
	}
	return rep
}

// crashRollbackChanged reports whether a rollback says it changed a
// session.
func crashRollbackChanged(tb testing.TB, out crashOut) bool {
	tb.Helper()
	for _, s := range crashRollbackReport(tb, out).Sessions {
		if s.Changed {
			return true
		}
	}
	return false
}

// TestCrashRollback migrates the tree (a refresh among the sessions), then
// kills `pisess rollback --tree T ID` at every failpoint hit it passes; the
// re-run must finish and leave the tree as before the migration (apart from
// .pisess/ and lock files), and a third run must change nothing.
func TestCrashRollback(t *testing.T) {
	bin, base := crashSetup(t)
	const cid = "run-crash-rolled-back"
	pool := crashPool(t, bin, base, "rollback", func(tr *crashTree) {
		// The rollback puts the displaced sidecar back byte for byte: keep
		// it, reproducible or not (issue 12 lets a refresh drop it).
		tr.keepDisplaced = true
		tr.makeStale(t)
		tr.snapshotSidecars(t)
		tr.want = tr.digestSkipping(t, crashNotRolledBack)
	})
	migrate := func(t *testing.T, tr *crashTree) {
		rep, out := tr.migrate(t, cid)
		if out.code != ExitClean || rep.Totals.Migrated != len(tr.sessions)-crashStaleSessions || rep.Totals.Refreshed != crashStaleSessions {
			t.Fatalf("migrate before the rollback: %+v\n%s", rep.Totals, out)
		}
	}
	args := func(tr *crashTree) []string { return []string{"rollback", "--json", "--tree", tr.root, cid} }
	finished := func(t *testing.T, tr *crashTree, out crashOut, when string) {
		t.Helper()
		if out.killed || out.code != ExitClean {
			t.Fatalf("%s: %s", when, out)
		}
		tr.checkSources(t, when)
		if d := fixtures.DigestDiff(tr.want, tr.digestSkipping(t, crashNotRolledBack)); len(d) > 0 {
			t.Errorf("%s: the tree differs from before the migration: %v", when, d)
		}
		before := tr.digestSkipping(t, crashIsJournal)
		third := tr.run(t, nil, args(tr)...)
		if third.killed || third.code != ExitClean || crashRollbackChanged(t, third) {
			t.Errorf("third run: %s", third)
		}
		if d := fixtures.DigestDiff(before, tr.digestSkipping(t, crashIsJournal)); len(d) > 0 {
			t.Errorf("third run changed %v", d)
		}
	}
	sc := crashScenario{
		args:    args,
		prepare: migrate,
		check: func(t *testing.T, tr *crashTree, p crashPoint) []string {
			tr.checkAfterKill(t)
			finished(t, tr, tr.run(t, nil, args(tr)...), "re-run")
			return nil
		},
		done:     func(t *testing.T, tr *crashTree, out crashOut) { finished(t, tr, out, "the unkilled run") },
		doneCode: ExitClean,
	}
	named, hits := crashKills(t, pool, sc, crashMaxHits)
	crashLogHits(t, hits)
	crashMustReach(t, hits, "rollback.before-sidecar-quarantine", "rollback.after-sidecar-quarantine",
		"rollback.before-displaced-restore", "rollback.after-displaced-restore", "rollback.after-rollback-record")
	torn, total := crashTornWrites(t, pool, sc, crashTornKills)
	t.Logf("rollback: %d kill points: %d at named failpoints, %d after n bytes (of about %d a run writes)", named+torn, named, torn, total)
}

// TestCrashMigrateThenRollback kills migrate at the first and the fifth
// hit (the fifth session is the refreshed one) of every failpoint, then
// rolls the interrupted run back by its correlation id: the rollback must
// finish and leave the tree as before the migration, apart from .pisess/,
// lock files and the run's staging directory (pisess's own partial output,
// fsck --repair's to quarantine); a second rollback changes nothing.
func TestCrashMigrateThenRollback(t *testing.T) {
	bin, base := crashSetup(t)
	const cid = "run-crash-interrupted"
	pool := crashPool(t, bin, base, "interrupted", func(tr *crashTree) {
		// The rollback puts the displaced sidecar back byte for byte: keep
		// it, reproducible or not (issue 12 lets a refresh drop it).
		tr.keepDisplaced = true
		tr.makeStale(t)
		tr.snapshotSidecars(t)
		tr.want = tr.digestSkipping(t, crashNotRolledBack)
	})
	notRolledBack := func(rel string) bool {
		return crashNotRolledBack(rel) || strings.Contains(rel, ".v2.staging.")
	}
	var points []crashPoint
	for _, name := range durable.KnownFailpoints() {
		points = append(points, failpointAt(name, 1), failpointAt(name, 5))
	}
	var mu sync.Mutex
	killed := 0
	crashParallel(pool, points, func(tr *crashTree, p crashPoint) {
		t.Run(p.name, func(t *testing.T) {
			tr.reset(t)
			if out := tr.run(t, p.env, tr.migrateArgs(cid)...); !out.killed {
				if out.code != ExitClean {
					t.Errorf("the unkilled migrate: %s", out)
				}
				return
			}
			mu.Lock()
			killed++
			mu.Unlock()
			tr.checkAfterKill(t)
			args := []string{"rollback", "--json", "--tree", tr.root, cid}
			out := tr.run(t, nil, args...)
			switch {
			case out.killed:
				t.Fatalf("an unarmed rollback was killed: %s", out)
			case out.code == ExitProblems && crashRollbackReport(t, out).Unknown != "":
				// Killed before the run recorded anything.
			case out.code != ExitClean:
				t.Fatalf("rollback of the interrupted run: %s", out)
			}
			tr.checkSources(t, "after the rollback")
			if d := fixtures.DigestDiff(tr.want, tr.digestSkipping(t, notRolledBack)); len(d) > 0 {
				t.Errorf("after the rollback the tree differs from before the migration: %v", d)
			}
			before := tr.digestSkipping(t, crashIsJournal)
			if again := tr.run(t, nil, args...); again.code != out.code || crashRollbackChanged(t, again) {
				t.Errorf("second rollback: %s", again)
			}
			if d := fixtures.DigestDiff(before, tr.digestSkipping(t, crashIsJournal)); len(d) > 0 {
				t.Errorf("second rollback changed %v", d)
			}
		})
	})
	t.Logf("migrate then rollback: %d kill points", killed)
}

// crashBugRebuildNotResumed names a known bug (TestCrashFsckRepair).
const crashBugRebuildNotResumed = "commands/engine fsck --repair: killed while rebuilding a corrupt sidecar " +
	"(RebuildSidecar: after the corrupt store became <stem>.v2.backup.*, or with the verified staging not yet " +
	"installed), the re-run finds a backup that fails the store check and a staging leftover, quarantines both " +
	"and stops: the session is left unmigrated (fsck exits 0) instead of being rebuilt as an uninterrupted " +
	"repair does; the next migrate migrates it"

// TestCrashFsckRepair damages a migrated tree (an index truncated mid-line,
// a manifest removed, a payload byte flipped, a backup left with no
// sidecar, a staging leftover) and kills `pisess fsck --repair` at every failpoint
// hit it passes; re-running fsck --repair must then leave a tree that fsck
// finds clean, every session migrated, no source byte changed, and one
// more fsck --repair must change nothing.
func TestCrashFsckRepair(t *testing.T) {
	bin, base := crashSetup(t)
	pool := crashPool(t, bin, base, "fsck", func(tr *crashTree) {
		if _, out := tr.migrate(t, "run-crash-fsck"); out.code != ExitClean {
			t.Fatalf("migrate: %s", out)
		}
		index := filepath.Join(tr.session(t, "accept/rollover").sidecar, "index", "offsets.jsonl")
		fi, err := os.Stat(index)
		if err != nil {
			t.Fatal(err)
		}
		fixtures.Truncate(t, index, fi.Size()-20)
		if err := os.Remove(filepath.Join(tr.session(t, "accept/tricky").sidecar, "manifest.json")); err != nil {
			t.Fatal(err)
		}
		// A flipped payload byte: corrupt, rebuilt from the source through
		// the migrate pipeline, the damaged store quarantined.
		seg := filepath.Join(tr.session(t, "accept/idless_entries").sidecar, "segments", "0000000000000001.seg")
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		fixtures.FlipByte(t, seg, int64(bytes.Index(b, []byte(`"timestamp"`))+3))
		// A backup with no sidecar (a cutover killed between its renames):
		// restored.
		s := tr.session(t, "realpi/01a20023-7352-730d-9957-7c9995b645f1")
		if err := os.Rename(s.sidecar, s.sidecar+".backup.0123456789abcdef0123456789abcdef"); err != nil {
			t.Fatal(err)
		}
		// A staging leftover beside a sidecar: quarantined.
		h := tr.session(t, "accept/header_only")
		fixtures.CopyTree(t, h.sidecar, h.sidecar+".staging.0123456789abcdef0123456789abcdef")
		if out := tr.fsck(t, nil, false); out.code != ExitProblems {
			t.Fatalf("fsck of the damaged tree: %s", out)
		}
		tr.snapshotSidecars(t)
		s.old = fixtures.TreeDigest(t, s.sidecar+".backup.0123456789abcdef0123456789abcdef")
	})
	// repaired checks the tree after an fsck --repair that ran to its end:
	// the damaged sidecar kept intact in the quarantine, the backup put back
	// (or kept), fsck clean, no leftovers, every session migrated with a
	// true fingerprint, and one more fsck --repair changes nothing. It
	// returns the known bugs met.
	repaired := func(t *testing.T, tr *crashTree, when string) (known []string) {
		t.Helper()
		tr.checkSources(t, when)
		for _, name := range []string{"accept/idless_entries", "realpi/01a20023-7352-730d-9957-7c9995b645f1"} {
			if s := tr.session(t, name); tr.recoverable(t, s) == "" {
				t.Errorf("%s: %s: its sidecar from before the repair is neither in place nor in the quarantine", when, name)
			}
		}
		if out := tr.fsck(t, nil, false); out.killed || out.code != ExitClean {
			t.Errorf("fsck %s: %s", when, out)
		}
		if l := tr.leftovers(t); len(l) > 0 {
			t.Errorf("leftovers %s: %v", when, l)
		}
		unmigrated := false
		for _, s := range tr.sessions {
			st, err := verify.Status(s.path)
			switch {
			case err == nil && st.Class == verify.ClassUnmigrated && s.name == "accept/idless_entries":
				unmigrated = true
			case err != nil || st.Class != verify.ClassMigrated:
				t.Errorf("%s %s: %s %v %v", s.name, when, st.Class, st.Findings, err)
			}
			tr.checkFingerprint(t, s)
		}
		if unmigrated {
			known = append(known, crashBugRebuildNotResumed)
			if _, out := tr.migrate(t, ""); out.code != ExitClean {
				t.Errorf("migrate after the re-run: %s", out)
			}
			if st, err := verify.Status(tr.session(t, "accept/idless_entries").path); err != nil || st.Class != verify.ClassMigrated {
				t.Errorf("accept/idless_entries after migrate: %s %v %v", st.Class, st.Findings, err)
			}
		}
		before := tr.digestSkipping(t, crashIsJournal)
		if out := tr.fsck(t, nil, true); out.killed || out.code != ExitClean {
			t.Errorf("fsck --repair once more: %s", out)
		}
		if d := fixtures.DigestDiff(before, tr.digestSkipping(t, crashIsJournal)); len(d) > 0 {
			t.Errorf("fsck --repair once more changed %v", d)
		}
		return known
	}
	sc := crashScenario{
		args: func(tr *crashTree) []string { return []string{"fsck", "--repair", "--json", "--jobs", "1", tr.root} },
		check: func(t *testing.T, tr *crashTree, p crashPoint) []string {
			tr.checkSources(t, "after the kill")
			for _, s := range tr.sessions {
				if _, err := os.Lstat(s.sidecar); err == nil {
					tr.checkFingerprint(t, s)
				}
			}
			tr.checkJournal(t)
			if out := tr.fsck(t, nil, true); out.killed || (out.code != ExitClean && out.code != ExitRepaired) {
				t.Fatalf("fsck --repair after the kill: %s", out)
			}
			return repaired(t, tr, "after the re-run")
		},
		done: func(t *testing.T, tr *crashTree, out crashOut) {
			if out.code != ExitRepaired {
				t.Fatalf("the unkilled fsck --repair: %s", out)
			}
			if known := repaired(t, tr, "after the unkilled run"); len(known) > 0 {
				t.Errorf("the unkilled fsck --repair left a corrupt sidecar unrebuilt")
			}
		},
		doneCode: ExitRepaired,
	}
	named, hits := crashKills(t, pool, sc, crashMaxHits)
	crashLogHits(t, hits)
	if named == 0 {
		t.Error("no failpoint killed fsck --repair")
	}
	torn, total := crashTornWrites(t, pool, sc, crashTornKills)
	t.Logf("fsck --repair: %d kill points: %d at named failpoints, %d after n bytes (of about %d a run writes)", named+torn, named, torn, total)
}
