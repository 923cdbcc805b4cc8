package commands

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pisess/ledger"
	"pisess/writers/durable"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: root over another uid's tree")
	}
}

// ownedTree makes a session tree at dir (two sessions: one JSONL v2 to
// upgrade, one v3 to migrate) and gives it, dir included, to uid:gid.
func ownedTree(t *testing.T, dir string, uid, gid int) {
	t.Helper()
	example, err := os.ReadFile(exampleSession)
	if err != nil {
		t.Fatal(err)
	}
	for p, data := range map[string]string{
		filepath.Join(dir, "--a--", "s.jsonl"): legacySession,
		filepath.Join(dir, "--p--", "m.jsonl"): string(example),
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	chownTree(t, dir, uid, gid)
}

func chownTree(t *testing.T, dir string, uid, gid int) {
	t.Helper()
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	}); err != nil {
		t.Fatal(err)
	}
}

// openBase is a t.TempDir whose parents the owners' children can search.
func openBase(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	for d := base; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

// notOwnedBy lists what under dir does not belong to uid (a file with
// several links aside: its other name may be anyone's).
func notOwnedBy(t *testing.T, dir string, uid uint32) []string {
	t.Helper()
	var bad []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := os.Lstat(p); err == nil {
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid && st.Nlink == 1 {
				bad = append(bad, fmt.Sprintf("%s (uid %d)", p, st.Uid))
			}
		}
		return nil
	})
	return bad
}

// TestRenameLoopHelper is not a test: started by TestRootRenameRace as
// the tree's owner, it renames the tree away and back in a loop until its
// stdin closes, as an owner attacking root's run would.
func TestRenameLoopHelper(t *testing.T) {
	tree := os.Getenv("PISESS_TEST_RENAME_LOOP")
	if tree == "" {
		t.Skip("helper process for TestRootRenameRace")
	}
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	aside := tree + ".x"
	fmt.Printf("renaming as uid %d\n", os.Getuid())
	for n := 0; ; n++ {
		select {
		case <-stop:
			_ = os.Rename(aside, tree)
			fmt.Printf("renamed %d times\n", n)
			return
		default:
		}
		if err := os.Rename(tree, aside); err != nil {
			fmt.Printf("rename: %v\n", err)
			return
		}
		time.Sleep(200 * time.Microsecond)
		if err := os.Rename(aside, tree); err != nil {
			fmt.Printf("rename back: %v\n", err)
			return
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// TestRootRenameRace (issue 32 §1): while the tree's owner renames the
// tree away and back in a loop, root runs migrate and status over it again
// and again for 20 seconds. Every run either hands the tree to a child
// running as the owner (it logs the switch) or fails naming the tree
// (exit 8); none works in root's process, and nothing in the owner's
// directory becomes root's. (On the old code, a failed lstat made the
// run go on as root: in-process runs, root-owned staging and journal.)
func TestRootRenameRace(t *testing.T) {
	requireRoot(t)
	base := openBase(t)
	home := filepath.Join(base, "home", "u2")
	tree := filepath.Join(home, "tree")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	ownedTree(t, tree, hostileUID, hostileUID)
	if err := os.Chown(home, hostileUID, hostileUID); err != nil {
		t.Fatal(err)
	}

	helper := exec.Command("/proc/self/exe", "-test.run=^TestRenameLoopHelper$", "-test.count=1")
	helper.Env = append(os.Environ(), "PISESS_TEST_RENAME_LOOP="+tree)
	helper.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: hostileUID, Gid: hostileUID, Groups: []uint32{}}}
	stdin, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stdin.Close()
			_ = helper.Wait()
		}
	}
	defer stop()
	if l := <-lines; l != fmt.Sprintf("renaming as uid %d", hostileUID) {
		t.Fatalf("the owner's rename loop did not start: %q", l)
	}

	var asOwner, refused, inRoot int
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		args := []string{"status", "--json", "--log-level", "debug", tree}
		if i%2 == 0 {
			args = []string{"migrate", "--force", "--json", "--log-level", "debug", tree}
		}
		r := pisess(t, args...)
		switch {
		case strings.Contains(r.stderr, "running as the owner of the tree"):
			asOwner++
		case r.code == ExitOperational && strings.Contains(r.stdout+r.stderr, home):
			refused++
		default:
			if inRoot++; inRoot <= 3 {
				t.Errorf("%s ran in root's process: exit %d\n%.2000s", args[0], r.code, r.stderr)
			}
		}
	}
	stop()
	for l := range lines {
		t.Log("owner: " + l)
	}
	t.Logf("%d runs as the owner, %d refused (exit 8, tree named), %d in root's process", asOwner, refused, inRoot)
	if asOwner < 5 {
		t.Errorf("only %d runs reached the owner's tree", asOwner)
	}
	if bad := notOwnedBy(t, home, hostileUID); len(bad) > 0 {
		t.Errorf("root's files in the owner's directory:\n%s", strings.Join(bad, "\n"))
	}
}

// pisessProcess runs the test binary as pisess in a process of its own,
// as cred (nil: as root), with stdout given, and returns how it ended and
// its stderr.
func pisessProcess(t *testing.T, cred *syscall.Credential, stdout *os.File, args ...string) (syscall.WaitStatus, string) {
	t.Helper()
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Args[0] = "pisess"
	cmd.Env = append(os.Environ(), envTestMain+"=1")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	_ = cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatalf("pisess %v did not run", args)
	}
	return cmd.ProcessState.Sys().(syscall.WaitStatus), stderr.String()
}

// brokenPipe returns the write end of a pipe whose reader is gone, as
// stdout is for `pisess status | head` once head has left.
func brokenPipe(t *testing.T) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { w.Close() })
	return w
}

// TestBrokenPipeAsRoot (issue 36 §8): `pisess status | head` whose reader
// left ends by SIGPIPE with nothing on stderr, run by the tree's owner and
// run by root over the owner's tree alike (root's run used to exit 8 with
// "signal: broken pipe").
func TestBrokenPipeAsRoot(t *testing.T) {
	requireRoot(t)
	h := newHostileTree(t)
	owner := &syscall.Credential{Uid: hostileUID, Gid: hostileUID, Groups: []uint32{}}
	for _, c := range []struct {
		who  string
		cred *syscall.Credential
	}{{"the owner", owner}, {"root", nil}} {
		ws, stderr := pisessProcess(t, c.cred, brokenPipe(t), "-v", "status", h.tree)
		if !ws.Signaled() || ws.Signal() != syscall.SIGPIPE || stderr != "" {
			t.Errorf("as %s: want death by SIGPIPE, quietly; got status %v (exit %d, signaled %v)\nstderr: %s", c.who, ws, ws.ExitStatus(), ws.Signaled(), stderr)
		}
	}
}

// TestOwnerChildProcessName (issue 36 §9): the child root starts as a
// tree's owner is called pisess, as the command was, so that ps -C pisess
// and pgrep pisess find it (it used to be "exe", from /proc/self/exe).
func TestOwnerChildProcessName(t *testing.T) {
	requireRoot(t)
	for _, tool := range []string{"ps", "pgrep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s (procps) is needed: %v", tool, err)
		}
	}
	h := newHostileTree(t)
	// Held, the tree lock keeps the owner's run waiting while we look.
	lock, _, err := durable.OS.TryLockTree(ledger.TreeLockPath(h.tree))
	if err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			lock.Unlock()
		}
	}
	defer release()
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- Main(context.Background(), []string{"pisess", "migrate", "--lock-wait", "60s", h.tree}, io.Discard, &stderr)
	}()
	me := strconv.Itoa(os.Getpid())
	child := ""
	for deadline := time.Now().Add(30 * time.Second); child == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out, _ := exec.Command("ps", "-C", "pisess", "-o", "pid=,ppid=").Output()
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[1] == me {
				child = f[0]
			}
		}
	}
	var pgrep []byte
	if child != "" {
		pgrep, _ = exec.Command("pgrep", "-x", "-P", me, "pisess").Output()
	}
	release()
	code := <-done
	if child == "" {
		t.Fatalf("ps -C pisess does not list the owner's run (exit %d)\n%s", code, stderr.String())
	}
	if !strings.Contains("\n"+string(pgrep), "\n"+child+"\n") {
		t.Errorf("pgrep -x pisess does not find the child %s: %q", child, pgrep)
	}
	if code != ExitClean {
		t.Errorf("migrate: exit %d\n%s", code, stderr.String())
	}
}

// TestRootRefusesWhatItCannotHandOver: as root, each way of keeping root
// from handing a tree to its owner is an error naming the tree (exit 8),
// and nothing is done in it.
func TestRootRefusesWhatItCannotHandOver(t *testing.T) {
	requireRoot(t)
	base := openBase(t)
	home := filepath.Join(base, "home", "u2")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, hostileUID, hostileUID); err != nil {
		t.Fatal(err)
	}
	userTree := filepath.Join(home, "tree")
	ownedTree(t, userTree, hostileUID, hostileUID)
	// A root tree in the owner's directory: the owner could swap it for a
	// tree of theirs between root's look and root's work.
	rootTree := filepath.Join(home, "roots")
	ownedTree(t, rootTree, 0, 0)
	// A link the owner made, to the owner's tree and to root's.
	link := filepath.Join(home, "link")
	if err := os.Symlink(userTree, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, hostileUID, hostileUID); err != nil {
		t.Fatal(err)
	}
	rootLink := filepath.Join(home, "rootlink")
	if err := os.Symlink(filepath.Join(base, "nowhere"), rootLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(rootLink, hostileUID, hostileUID); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(home, "gone"), "no such file or directory"},
		{"root's tree where the owner can swap it", rootTree, "lies where another user can replace it"},
		{"the owner's link", link, "symbolic link root does not control"},
		{"the owner's link to a missing target", rootLink, "symbolic link root does not control"},
		{"a session file under the owner's link", filepath.Join(link, "--p--", "m.jsonl"), "symbolic link root does not control"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, cmd := range []string{"migrate", "status", "fsck"} {
				r := pisess(t, cmd, c.path)
				if r.code != ExitOperational || !strings.Contains(r.stderr, "tree "+home) || !strings.Contains(r.stderr, c.want) {
					t.Errorf("%s: want exit 8 naming the tree and %q: %s", cmd, c.want, r)
				}
			}
		})
	}
	if bad := notOwnedBy(t, userTree, hostileUID); len(bad) > 0 {
		t.Errorf("root's files in the owner's tree: %v", bad)
	}
	if _, err := os.Lstat(filepath.Join(rootTree, ".pisess")); err == nil {
		t.Errorf("root worked in its tree inside the owner's directory")
	}
	// The variable that marks the child does not make root's process one.
	t.Setenv(envOwnerChild, strconv.Itoa(hostileUID))
	if r := pisess(t, "migrate", userTree); r.code != ExitOperational || !strings.Contains(r.stderr, envOwnerChild) {
		t.Errorf("with %s set by hand: %s", envOwnerChild, r)
	}
	if bad := notOwnedBy(t, userTree, hostileUID); len(bad) > 0 {
		t.Errorf("root's files in the owner's tree: %v", bad)
	}
}

// TestRootOwnTreeInProcess: a tree of root's on a path only root can
// change is still handled in root's process, no child started.
func TestRootOwnTreeInProcess(t *testing.T) {
	requireRoot(t)
	tree := filepath.Join(openBase(t), "tree")
	ownedTree(t, tree, 0, 0)
	r := pisess(t, "--log-level", "debug", "migrate", tree)
	if r.code != ExitClean || strings.Contains(r.stderr, "running as the owner") {
		t.Fatalf("root's own tree: %s", r)
	}
}
