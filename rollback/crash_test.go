//go:build failpoints

package rollback

// The crash harness (STYLE.md §6): each test builds a fresh tree, runs the
// operation in a child process (this test binary again, TestHelperProcess)
// with PISESS_FAILPOINT arming one failpoint at one hit, which SIGKILLs the
// child there, then checks what the kill left, runs the operation again in
// this process until it converges, and once more to see it change nothing.
// It loops over every failpoint registered with durable (so a new one is
// tested for free) and every hit of it, until the child finishes unkilled.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/ledger"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// TestHelperProcess is the child: it does one operation, described by the
// environment, and is killed at the armed failpoint.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("GO_WANT_HELPER") != "1" {
		t.Skip("helper process for the crash tests")
	}
	env := os.Getenv
	ctx := context.Background()
	switch env("PISESS_HELPER_OP") {
	case "migrate":
		migrateRun(t, env("PISESS_HELPER_TREE"), env("PISESS_HELPER_SESSION"), env("PISESS_HELPER_CID"))
	case "rollback":
		if _, err := ByCorrelation(ctx, env("PISESS_HELPER_TREE"), env("PISESS_HELPER_CID"), Options{}); err != nil {
			t.Fatal(err)
		}
	case "checkpoint":
		seq, _ := strconv.ParseUint(env("PISESS_HELPER_SEQ"), 10, 64)
		if _, err := ToCheckpoint(ctx, env("PISESS_HELPER_STORE"), seq, checkpointOptions()); err != nil {
			t.Fatal(err)
		}
	case "finish":
		if _, err := FinishPendingWith(ctx, env("PISESS_HELPER_STORE"), checkpointOptions()); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown helper op %q", env("PISESS_HELPER_OP"))
	}
}

// runChild runs the helper with env and the failpoint fp armed; it reports
// whether the failpoint killed it. A child that ends otherwise must have
// passed.
func runChild(tb testing.TB, fp string, env ...string) bool {
	tb.Helper()
	env = append(env, "GO_WANT_HELPER=1")
	if fp != "" {
		env = append(env, "PISESS_FAILPOINT="+fp)
	}
	killed, stdout, stderr := fixtures.RunKilled(tb, os.Args[0], []string{"-test.run=^TestHelperProcess$", "-test.count=1"}, env)
	if !killed && !strings.Contains(stdout, "PASS") {
		tb.Fatalf("child with %s failed:\n%s\n%s", fp, stdout, stderr)
	}
	return killed
}

// failpointsFor returns every registered failpoint except the other
// operations' own ones of this package, which the operation cannot pass.
func failpointsFor(skip ...[]string) []string {
	drop := map[string]bool{}
	for _, list := range skip {
		for _, n := range list {
			drop[n] = true
		}
	}
	var out []string
	for _, n := range durable.KnownFailpoints() {
		if !drop[n] && !strings.HasPrefix(n, "upgrade.") {
			out = append(out, n)
		}
	}
	return out
}

// forEachKill calls scenario for every failpoint and hit until the child
// runs to its end; it fails when no failpoint of the operation's own list
// killed the child at all.
func forEachKill(t *testing.T, names []string, own []string, scenario func(t *testing.T, fp string) bool) {
	killedOwn := map[string]bool{}
	total := 0
	for _, name := range names {
		for n := 1; n <= 60; n++ {
			fp := fmt.Sprintf("%s@%d", name, n)
			killed := false
			t.Run(fp, func(t *testing.T) { killed = scenario(t, fp) })
			if !killed {
				break
			}
			total++
			killedOwn[name] = true
		}
	}
	for _, name := range own {
		if !killedOwn[name] {
			t.Logf("failpoint %s was never reached in this scenario", name)
		}
	}
	t.Logf("%d kill points", total)
	if total == 0 {
		t.Fatal("no failpoint killed the child")
	}
}

// withoutStaging drops staging leftovers (fsck's to clear) from a digest.
func withoutStaging(d map[string]string) map[string]string {
	for k := range d {
		if strings.Contains(k, ".v2.staging.") {
			delete(d, k)
		}
	}
	return d
}

func sidecarState(tb testing.TB, sidecar string) map[string]string {
	tb.Helper()
	if _, err := os.Lstat(sidecar); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return fixtures.TreeDigest(tb, sidecar)
}

// rollbackConverges rolls back cid in this process (an unknown id is
// fine when the kill came before the run recorded anything), checks that
// the tree is want, and that running again changes nothing.
func rollbackConverges(t *testing.T, tree, cid string, want map[string]string) {
	t.Helper()
	rep, err := ByCorrelation(context.Background(), tree, cid, Options{})
	if errors.Is(err, ErrUnknownCorrelation) {
		if d := diffMaps(withoutStaging(userTree(t, tree)), want); d != "" {
			t.Fatalf("nothing recorded, yet the tree changed:\n%s", d)
		}
		return
	}
	if err != nil || rep.Problems() > 0 {
		t.Fatalf("rollback after the kill: %+v %v", rep, err)
	}
	if d := diffMaps(withoutStaging(userTree(t, tree)), want); d != "" {
		t.Fatalf("after the rollback the tree is not as before the run:\n%s", d)
	}
	checkConverged(t, tree, cid)
}

func TestCrashCutover(t *testing.T) {
	names := failpointsFor(correlationFailpoints, checkpointFailpoints)
	for _, refresh := range []bool{false, true} {
		t.Run(fmt.Sprintf("refresh=%t", refresh), func(t *testing.T) {
			own := []string{fpBeforeCutoverRecord, fpAfterCutoverRecord, fpBeforeInstallRename, fpAfterInstallRename}
			if refresh {
				own = cutoverFailpoints
			}
			forEachKill(t, names, own, func(t *testing.T, fp string) bool {
				f := newTreeFixture(t, 4)
				var old map[string]string
				if refresh {
					migrateRun(t, f.tree, f.session, "run-0001-first")
					appendEntries(t, f.session, 5, 6)
					old = fixtures.TreeDigest(t, f.sidecar)
				}
				pre := userTree(t, f.tree)
				src := fixtures.SHA256File(t, f.session)
				const cid = "run-0002-crashed"
				if !runChild(t, fp, "PISESS_HELPER_OP=migrate", "PISESS_HELPER_TREE="+f.tree,
					"PISESS_HELPER_SESSION="+f.session, "PISESS_HELPER_CID="+cid) {
					return false
				}
				if fixtures.SHA256File(t, f.session) != src {
					t.Fatal("the source changed")
				}
				backup := BackupPath(f.sidecar, cid)
				switch now := sidecarState(t, f.sidecar); {
				case now == nil && !refresh:
				case now == nil:
					// Between the two renames: the old sidecar is the backup.
					if d := diffMaps(fixtures.TreeDigest(t, backup), old); d != "" {
						t.Fatalf("no sidecar and the backup is not the old one:\n%s", d)
					}
				case refresh && diffMaps(now, old) == "":
				default:
					checkInstalled(t, f.session)
				}
				if q := ledger.QuarantinePath(f.tree, cid, f.rel, kindDisplaced); sidecarState(t, q) != nil {
					if d := diffMaps(fixtures.TreeDigest(t, q), old); d != "" {
						t.Fatalf("the quarantined store is not the old sidecar:\n%s", d)
					}
				}
				rollbackConverges(t, f.tree, cid, pre)
				return true
			})
		})
	}
}

func TestCrashRollbackRefresh(t *testing.T) {
	names := failpointsFor(cutoverFailpoints, checkpointFailpoints)
	forEachKill(t, names, []string{fpBeforeSidecarQuarantine, fpAfterSidecarQuarantine, fpBeforeDisplacedRestore,
		fpAfterDisplacedRestore, fpAfterRollbackRecord}, func(t *testing.T, fp string) bool {
		f := newTreeFixture(t, 4)
		migrateRun(t, f.tree, f.session, "run-0001-first")
		appendEntries(t, f.session, 5, 6)
		pre := userTree(t, f.tree)
		first := fixtures.TreeDigest(t, f.sidecar)
		const cid = "run-0002-second"
		migrateRun(t, f.tree, f.session, cid)
		second := fixtures.TreeDigest(t, f.sidecar)
		src := fixtures.SHA256File(t, f.session)
		if !runChild(t, fp, "PISESS_HELPER_OP=rollback", "PISESS_HELPER_TREE="+f.tree, "PISESS_HELPER_CID="+cid) {
			return false
		}
		if fixtures.SHA256File(t, f.session) != src {
			t.Fatal("the source changed")
		}
		if now := sidecarState(t, f.sidecar); now != nil && diffMaps(now, first) != "" && diffMaps(now, second) != "" {
			t.Fatalf("the sidecar is neither the run's nor the one it displaced")
		}
		rollbackConverges(t, f.tree, cid, pre)
		if d := diffMaps(fixtures.TreeDigest(t, f.sidecar), first); d != "" {
			t.Fatalf("the displaced sidecar is not back byte for byte:\n%s", d)
		}
		return true
	})
}

func TestCrashRollbackUpgrade(t *testing.T) {
	names := failpointsFor(cutoverFailpoints, checkpointFailpoints)
	forEachKill(t, names, []string{fpBeforeSidecarQuarantine, fpAfterSidecarQuarantine, fpBeforeSourceLink,
		fpAfterSourceLink, fpBeforeSourceRestore, fpAfterSourceRestore}, func(t *testing.T, fp string) bool {
		f := newV2Fixture(t, 4)
		pre := userTree(t, f.tree)
		const cid = "run-0003-upgrade"
		orig, rewritten := upgradeRun(t, f, cid)
		migrateRun(t, f.tree, f.session, cid)
		installed := fixtures.TreeDigest(t, f.sidecar)
		if !runChild(t, fp, "PISESS_HELPER_OP=rollback", "PISESS_HELPER_TREE="+f.tree, "PISESS_HELPER_CID="+cid) {
			return false
		}
		if got := fixtures.SHA256File(t, f.session); got != sha256Hex(orig) && got != sha256Hex(rewritten) {
			t.Fatal("the source is neither the original nor the upgraded file")
		}
		if now := sidecarState(t, f.sidecar); now != nil && diffMaps(now, installed) != "" {
			t.Fatal("the sidecar is not the run's")
		}
		rollbackConverges(t, f.tree, cid, pre)
		return true
	})
}

func TestCrashRollbackUpgradeGrown(t *testing.T) {
	names := failpointsFor(cutoverFailpoints, checkpointFailpoints)
	forEachKill(t, names, []string{fpBeforeGrownCopy, fpAfterGrownCopy}, func(t *testing.T, fp string) bool {
		f := newV2Fixture(t, 4)
		const cid = "run-0004-grown"
		upgradeRun(t, f, cid)
		migrateRun(t, f.tree, f.session, cid)
		appendEntries(t, f.session, 5, 6)
		before := withoutStaging(userTree(t, f.tree))
		if !runChild(t, fp, "PISESS_HELPER_OP=rollback", "PISESS_HELPER_TREE="+f.tree, "PISESS_HELPER_CID="+cid) {
			return false
		}
		for i := 0; i < 2; i++ {
			rep, err := ByCorrelation(context.Background(), f.tree, cid, Options{})
			if err != nil || len(rep.Sessions) != 1 || !errors.Is(rep.Sessions[0].Error, ErrSourceChanged) {
				t.Fatalf("re-run %d: %+v %v", i, rep, err)
			}
			if d := diffMaps(userTree(t, f.tree), before); d != "" {
				t.Fatalf("a refused session changed:\n%s", d)
			}
		}
		j := journalLines(t, f.tree)
		if _, err := ByCorrelation(context.Background(), f.tree, cid, Options{}); err != nil || journalLines(t, f.tree) != j {
			t.Fatalf("a third run changed the journal (%v)", err)
		}
		return true
	})
}

func TestCrashToCheckpoint(t *testing.T) {
	ref := newSidecarFixture(t, cpEntries, cpAt, cpMaxSeg)
	if _, err := ToCheckpoint(context.Background(), ref.sidecar, 2, checkpointOptions()); err != nil {
		t.Fatal(err)
	}
	want := comparableStore(t, ref.sidecar)
	delete(want, "ledger-events")
	names := failpointsFor(cutoverFailpoints, correlationFailpoints)
	forEachKill(t, names, checkpointFailpoints, func(t *testing.T, fp string) bool {
		f := newSidecarFixture(t, cpEntries, cpAt, cpMaxSeg)
		before := fixtures.TreeDigest(t, f.sidecar)
		src := fixtures.SHA256File(t, f.session)
		env := []string{"PISESS_HELPER_STORE=" + f.sidecar}
		if !runChild(t, fp, append(env, "PISESS_HELPER_OP=checkpoint", "PISESS_HELPER_SEQ=2")...) {
			return false
		}
		if fixtures.SHA256File(t, f.session) != src {
			t.Fatal("the source changed")
		}
		_, pending := os.Lstat(IntentPath(f.sidecar))
		if pending == nil {
			// Recovery itself killed at the same step, then finished.
			runChild(t, strings.SplitN(fp, "@", 2)[0]+"@1", append(env, "PISESS_HELPER_OP=finish")...)
			// Until it is marked dirty, a pending rollback has not touched
			// the index, segments or manifest: pi may still resume them.
			now := fixtures.TreeDigest(t, f.sidecar)
			if s, err := wire.ParseSourceState([]byte(readOr(f.sidecar))); (err != nil || s.State != wire.SourceDirty) &&
				diffMaps(withoutTmp(withoutSourceState(now)), withoutTmp(withoutSourceState(before))) != "" {
				t.Fatal("a pending rollback changed the store before marking the sidecar dirty")
			}
			ok, err := FinishPendingWith(context.Background(), f.sidecar, checkpointOptions())
			if err != nil {
				t.Fatalf("FinishPending: %v %v", ok, err)
			}
		} else if !rolledBack(t, f.sidecar) {
			// Killed before the intent was published: nothing but tmp/
			// may differ; the rollback is simply made again.
			now := fixtures.TreeDigest(t, f.sidecar)
			if d := diffMaps(withoutTmp(now), withoutTmp(before)); d != "" {
				t.Fatalf("killed before its intent, the rollback changed the store:\n%s", d)
			}
			if _, err := ToCheckpoint(context.Background(), f.sidecar, 2, checkpointOptions()); err != nil {
				t.Fatal(err)
			}
		}
		got := comparableStore(t, f.sidecar)
		delete(got, "ledger-events")
		if d := diffMaps(withoutTmp(got), withoutTmp(want)); d != "" {
			t.Fatalf("the finished rollback differs from an uninterrupted one:\n%s", d)
		}
		checkRolledBack(t, f, before, src)
		// Once more: nothing pending, nothing changes.
		d := fixtures.TreeDigest(t, f.sidecar)
		if ok, err := FinishPendingWith(context.Background(), f.sidecar, checkpointOptions()); ok || err != nil {
			t.Fatalf("third FinishPending: %v %v", ok, err)
		}
		if diff := diffMaps(fixtures.TreeDigest(t, f.sidecar), d); diff != "" {
			t.Fatalf("a third run changed the store:\n%s", diff)
		}
		return true
	})
}

// rolledBack reports whether the store's ledger holds the rollback's ok
// event: the child was killed after it, at the intent's removal or later.
func rolledBack(tb testing.TB, dir string) bool {
	ev, err := findEvent(dir, testMigration, testRun, wire.OutcomeOK)
	return err == nil && ev != nil
}

func withoutTmp(d map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range d {
		if k != store.TmpDir && !strings.HasPrefix(k, store.TmpDir+"/") {
			out[k] = v
		}
	}
	return out
}

func readOr(sidecar string) string {
	b, _ := os.ReadFile(store.SourceStatePath(sidecar))
	return string(b)
}

func withoutSourceState(d map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range d {
		if k != store.SourceStateName {
			out[k] = v
		}
	}
	return out
}
