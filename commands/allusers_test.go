package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/writers/durable"
)

// testAccount is a real account of the system's user database, made for
// a test with useradd and removed with userdel after it.
type testAccount struct {
	name     string
	uid, gid int
	home     string
}

// addAccounts makes n accounts whose homes are under base (made, and
// given to each account).
func addAccounts(t *testing.T, base string, n int) []testAccount {
	t.Helper()
	requireRoot(t)
	var out []testAccount
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("pst%05d%c", os.Getpid()%100000, 'a'+i)
		home := filepath.Join(base, "home", name)
		var err error
		var msg []byte
		// useradd takes a lock on the database: another test's may hold it.
		for try := 0; try < 20; try++ {
			if msg, err = exec.Command("useradd", "-M", "-d", home, "-s", "/usr/sbin/nologin", "-U", name).CombinedOutput(); err == nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("useradd %s: %v: %s", name, err, msg)
		}
		t.Cleanup(func() {
			for try := 0; try < 20; try++ {
				if exec.Command("userdel", name).Run() == nil {
					return
				}
				time.Sleep(250 * time.Millisecond)
			}
			t.Errorf("userdel %s failed", name)
		})
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		a := testAccount{name: name, home: home}
		a.uid, _ = strconv.Atoi(u.Uid)
		a.gid, _ = strconv.Atoi(u.Gid)
		if err := os.MkdirAll(home, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(home, a.uid, a.gid); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

// keepToAccounts has --all-users list, of the system's user database,
// only the accounts given: the test must not touch the trees of the
// machine's other users. It fails unless the database lists every one of
// them with its home.
func keepToAccounts(t *testing.T, accounts []testAccount) {
	t.Helper()
	want := map[string]testAccount{}
	for _, a := range accounts {
		want[a.name] = a
	}
	all, err := discover.Accounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, a := range all {
		if w, ok := want[a.Name]; ok {
			found++
			if a.Home != w.home || int(a.UID) != w.uid {
				t.Fatalf("user database: %+v, want home %s uid %d", a, w.home, w.uid)
			}
		}
	}
	if found != len(accounts) {
		t.Fatalf("the user database lists %d of the %d accounts made", found, len(accounts))
	}
	old := userAccounts
	userAccounts = func(ctx context.Context) ([]discover.Account, error) {
		all, err := discover.Accounts(ctx)
		var mine []discover.Account
		for _, a := range all {
			if _, ok := want[a.Name]; ok {
				mine = append(mine, a)
			}
		}
		return mine, err
	}
	t.Cleanup(func() { userAccounts = old })
}

// multiReport is the --json report of a run over several trees.
type multiReport struct {
	CorrelationID string           `json:"correlationId"`
	Trees         []string         `json:"trees"`
	ExitStatus    int              `json:"exitStatus"`
	Totals        map[string]int64 `json:"totals"`
	Items         []struct {
		Path    string `json:"path"`
		Class   string `json:"class"`
		Outcome string `json:"outcome"`
		Error   *struct {
			Class, Message string
		} `json:"error"`
	} `json:"items"`
	Detail struct {
		Trees []struct {
			Tree          string           `json:"tree"`
			UID           *int             `json:"uid"`
			User          string           `json:"user"`
			ExitStatus    int              `json:"exitStatus"`
			CorrelationID string           `json:"correlationId"`
			Totals        map[string]int64 `json:"totals"`
			Detail        json.RawMessage  `json:"detail"`
			Error         *struct {
				Class, Message string
			} `json:"error"`
		} `json:"trees"`
	} `json:"detail"`
}

func decodeMulti(t *testing.T, r result) multiReport {
	t.Helper()
	var m multiReport
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("report: %v\n%s", err, r)
	}
	return m
}

// TestAllUsers (issue 35 §2): root runs migrate --all-users over the
// default trees of real accounts: a healthy one, one its owner cannot read
// (chmod 000), one with no tree at all. Each tree is migrated by a child
// as its owner (what is made there is the owner's); the broken tree is
// reported and does not stop the other; the missing tree is not mentioned;
// one report (text, or one pisess.report.v1 envelope with a section per
// tree), one exit status, the most urgent (8). Once the tree is mended, a
// -q run migrates it, and the next -q run prints nothing.
func TestAllUsers(t *testing.T) {
	requireRoot(t)
	base := openBase(t)
	acc := addAccounts(t, base, 3)
	keepToAccounts(t, acc)
	good, broken, none := acc[0], acc[1], acc[2]
	goodTree, brokenTree := discover.UserDefaultRoot(good.home), discover.UserDefaultRoot(broken.home)
	for _, a := range []testAccount{good, broken} {
		ownedTree(t, discover.UserDefaultRoot(a.home), a.uid, a.gid)
		chownTree(t, filepath.Join(a.home, ".pi"), a.uid, a.gid)
	}
	if err := os.Chmod(brokenTree, 0); err != nil {
		t.Fatal(err)
	}

	r := pisess(t, "migrate", "--all-users", "--json")
	m := decodeMulti(t, r)
	if r.code != ExitOperational || m.ExitStatus != ExitOperational {
		t.Fatalf("want exit 8 (the broken tree's): %s", r)
	}
	if len(m.Detail.Trees) != 2 || m.Detail.Trees[0].Tree != goodTree || m.Detail.Trees[1].Tree != brokenTree {
		t.Fatalf("sections: want %s and %s only: %s", goodTree, brokenTree, r.stdout)
	}
	g, b := m.Detail.Trees[0], m.Detail.Trees[1]
	if g.ExitStatus != ExitClean || g.User != good.name || g.UID == nil || *g.UID != good.uid || g.Totals["migrated"] != 1 || g.CorrelationID != m.CorrelationID || m.CorrelationID == "" {
		t.Errorf("healthy tree's section: %+v (run %s)", g, m.CorrelationID)
	}
	if b.ExitStatus != ExitOperational || b.Error == nil || !strings.Contains(b.Error.Message, "permission denied") {
		t.Errorf("broken tree's section: %+v", b)
	}
	if m.Totals["trees"] != 2 || m.Totals["treesFailed"] != 1 || m.Totals["migrated"] != 1 {
		t.Errorf("totals %v", m.Totals)
	}
	failedItem := false
	for _, it := range m.Items {
		if it.Path == brokenTree && it.Class == "tree" && it.Outcome == "failed" && it.Error != nil {
			failedItem = true
		}
	}
	if !failedItem {
		t.Errorf("no item names the broken tree: %s", r.stdout)
	}
	if strings.Contains(r.stdout, none.home) || strings.Contains(r.stderr, none.home) {
		t.Errorf("the account without a tree is mentioned: %s", r)
	}
	if _, err := os.Lstat(filepath.Join(none.home, ".pi")); err == nil {
		t.Errorf("something was made in the home without a tree")
	}
	if _, err := os.Stat(filepath.Join(goodTree, "--p--", "m.v2")); err != nil {
		t.Errorf("the healthy tree was not migrated: %v", err)
	}
	if bad := notOwnedBy(t, good.home, uint32(good.uid)); len(bad) > 0 {
		t.Errorf("not the owner's: %v", bad)
	}

	// Text: each tree's report under its name, then every tree's status.
	r = pisess(t, "migrate", "--all-users")
	if r.code != ExitOperational {
		t.Fatalf("text: %s", r)
	}
	for _, want := range []string{
		fmt.Sprintf("==> %s (user %s, uid %d) <==", goodTree, good.name, good.uid),
		"migrate --all-users: 2 tree(s), exit status 8",
		fmt.Sprintf("8     %s  %s", broken.name, brokenTree),
		fmt.Sprintf("0     %s  %s", good.name, goodTree),
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("text report lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("the broken tree's error is not on stderr: %s", r.stderr)
	}

	if err := os.Chmod(brokenTree, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if r := pisess(t, "-q", "migrate", "--all-users"); r.code != ExitClean || r.stdout != "" {
			t.Errorf("-q run %d after the repair: %s", i+1, r)
		}
	}
	if bad := notOwnedBy(t, broken.home, uint32(broken.uid)); len(bad) > 0 {
		t.Errorf("not the owner's: %v", bad)
	}
	if r := pisess(t, "status", "--all-users", "--json"); r.code != ExitClean || len(decodeMulti(t, r).Detail.Trees) != 2 {
		t.Errorf("status --all-users: %s", r)
	}
}

// twoOwners makes two trees, base/a of hostileUID and base/b of the uid
// after it (as root).
func twoOwners(t *testing.T) (base, a, b string) {
	t.Helper()
	requireRoot(t)
	base = openBase(t)
	a, b = filepath.Join(base, "a"), filepath.Join(base, "b")
	ownedTree(t, a, hostileUID, hostileUID)
	ownedTree(t, b, hostileUID+1, hostileUID+1)
	return base, a, b
}

// TestRootManyOwners: root names trees of different owners in one
// command: each runs as its owner, a missing tree named on the command
// line is an error for that tree only (exit 8, named), the others run;
// rollback still wants one owner per run.
func TestRootManyOwners(t *testing.T) {
	base, a, b := twoOwners(t)
	missing := filepath.Join(base, "missing")

	r := pisess(t, "migrate", "--json", a, missing, b)
	m := decodeMulti(t, r)
	if r.code != ExitOperational || len(m.Detail.Trees) != 3 {
		t.Fatalf("want exit 8 and three sections: %s", r)
	}
	for i, want := range []struct {
		tree string
		exit int
	}{{a, ExitClean}, {missing, ExitOperational}, {b, ExitClean}} {
		if s := m.Detail.Trees[i]; s.Tree != want.tree || s.ExitStatus != want.exit {
			t.Errorf("section %d: %+v, want tree %s exit %d", i, s, want.tree, want.exit)
		}
	}
	if e := m.Detail.Trees[1].Error; e == nil || !strings.Contains(e.Message, missing) {
		t.Errorf("the missing tree is not named: %+v", e)
	}
	if s := m.Detail.Trees[2]; s.UID == nil || *s.UID != hostileUID+1 || s.CorrelationID != m.CorrelationID {
		t.Errorf("second owner's section: %+v", s)
	}
	if bad := notOwnedBy(t, a, hostileUID); len(bad) > 0 {
		t.Errorf("not the owner's: %v", bad)
	}
	if bad := notOwnedBy(t, b, hostileUID+1); len(bad) > 0 {
		t.Errorf("not the owner's: %v", bad)
	}

	r = pisess(t, "status", a, b)
	if r.code != ExitClean || !strings.Contains(r.stdout, fmt.Sprintf("==> %s (uid %d) <==", a, hostileUID)) ||
		!strings.Contains(r.stdout, fmt.Sprintf("==> %s (uid %d) <==", b, hostileUID+1)) {
		t.Errorf("status over two owners' trees: %s", r)
	}
	if r := pisess(t, "-q", "status", a, b); r.code != ExitClean || r.stdout != "" {
		t.Errorf("-q status over two owners' trees: %s", r)
	}
	if r := pisess(t, "rollback", "--tree", a, "--tree", b, m.CorrelationID); r.code != ExitUsage {
		t.Errorf("rollback over two owners: %s", r)
	}
}

// TestAllUsersUsage: --all-users takes no path, and is root's: another
// user gets a usage error saying to run without it.
func TestAllUsersUsage(t *testing.T) {
	if r := pisess(t, "status", "--all-users", t.TempDir()); os.Geteuid() == 0 && r.code != ExitUsage {
		t.Errorf("--all-users with a path: %s", r)
	}
	if r := pisess(t, "rollback", "--all-users", "some-run-id"); r.code != ExitUsage {
		t.Errorf("rollback --all-users: %s", r)
	}
	requireRoot(t)
	ws, stderr := pisessProcess(t, &syscall.Credential{Uid: hostileUID, Gid: hostileUID, Groups: []uint32{}}, nil, "status", "--all-users")
	if ws.ExitStatus() != ExitUsage || !strings.Contains(stderr, "--all-users is for root") {
		t.Errorf("as uid %d: exit %d: %s", hostileUID, ws.ExitStatus(), stderr)
	}
}

// TestRootManyOwnersInterrupted: an interrupt stops the run over several
// trees: the tree running is told (SIGTERM) and stops, the trees after it
// are reported not run, and a usage error a child finds (the same for
// every tree) ends the run at the first tree.
func TestRootManyOwnersInterrupted(t *testing.T) {
	_, a, b := twoOwners(t)
	if r := pisess(t, "prune", "--json", a, b); r.code != ExitUsage || !strings.Contains(r.stdout, "keep-within") || strings.Count(r.stdout, `"schema"`) != 1 {
		t.Errorf("prune without --keep-within over two owners: %s", r)
	}

	if r := pisess(t, "migrate", a); r.code != ExitClean { // makes a's .pisess
		t.Fatalf("setup: %s", r)
	}
	lock, _, err := durable.OS.TryLockTree(ledger.TreeLockPath(a))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		code := Main(ctx, []string{"pisess", "migrate", "--json", "--lock-wait", "60s", a, b}, &out, &errb)
		done <- result{code: code, stdout: out.String(), stderr: errb.String()}
	}()
	time.Sleep(2 * time.Second) // the child waits for a's tree lock
	start := time.Now()
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not stop in 30s")
	}
	validateReport(t, r.stdout)
	m := decodeMulti(t, r)
	// The tree waited for stops (locked, or interrupted: the most urgent
	// of it and of 8 for the tree not run).
	if r.code != m.ExitStatus || (r.code != ExitOperational && r.code != ExitLocked) || len(m.Detail.Trees) != 2 {
		t.Fatalf("want exit 8 or 32 and two sections: %s", r)
	}
	if s := m.Detail.Trees[1]; s.Error == nil || s.Error.Class != ClassCanceled {
		t.Errorf("the tree after the interrupt: %+v", s)
	}
	if _, err := os.Lstat(filepath.Join(b, "--p--", "m.v2")); err == nil {
		t.Errorf("the tree after the interrupt was migrated")
	}
	t.Logf("stopped %s after the interrupt", time.Since(start))
}
