package privtmp

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envHolder makes the test binary a holder: it makes a directory in the
// temporary directory it names, prints its path, and waits to be killed.
const envHolder = "PISESS_PRIVTMP_HOLDER"

func TestMain(m *testing.M) {
	if root := os.Getenv(envHolder); root != "" {
		d, err := Make(root, PrefixSQLite)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		os.WriteFile(filepath.Join(d.Path, "session.sqlite"), []byte("a private copy"), 0o600)
		fmt.Println(d.Path)
		time.Sleep(time.Hour)
	}
	os.Exit(m.Run())
}

// holder starts a process that holds a directory in root and returns it
// and the directory.
func holder(t *testing.T, root string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHolder+"="+root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(strings.TrimSpace(line), root) {
		t.Fatalf("holder: %q %v", line, err)
	}
	return cmd, strings.TrimSpace(line)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// TestDeadHoldersAreSwept: the directory of a process killed while it held
// it is removed by the next process's first Make there; a live holder's is
// not (issue 32 §3: a killed migrate left its 98 MB private copy in
// $TMPDIR, and no later run removed it).
func TestDeadHoldersAreSwept(t *testing.T) {
	root := t.TempDir()
	dead, deadDir := holder(t, root)
	_, liveDir := holder(t, root)
	if err := dead.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	dead.Wait()
	removed, err := Sweep(root, PrefixSQLite, PrefixDryRun)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != deadDir || exists(deadDir) {
		t.Errorf("swept %v; want only the dead holder's %s (still there: %t)", removed, deadDir, exists(deadDir))
	}
	if !exists(filepath.Join(liveDir, "session.sqlite")) {
		t.Errorf("the live holder's directory was swept")
	}
	// Make sweeps on its own, once per process and root.
	again, againDir := holder(t, root)
	again.Process.Kill()
	again.Wait()
	sweepOnce.Lock()
	delete(sweepOnce.done, root)
	sweepOnce.Unlock()
	d, err := Make(root, PrefixDryRun)
	if err != nil {
		t.Fatal(err)
	}
	if exists(againDir) {
		t.Errorf("Make did not sweep the dead %s", againDir)
	}
	if err := d.Remove(); err != nil || exists(d.Path) {
		t.Errorf("Remove: %v (still there: %t)", err, exists(d.Path))
	}
}

// TestSweepTouchesOnlyItsOwn: a symlink by a pisess name, another user's
// directory, a name of another prefix and a fresh lockless directory stay;
// a lockless one untouched for two days goes; and a dead directory whose
// subdirectory was swapped for a symlink is removed without following it.
func TestSweepTouchesOnlyItsOwn(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	canary := filepath.Join(outside, "canary")
	if err := os.WriteFile(canary, []byte("not pisess's"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A dead holder's directory (first: its Make sweeps), a subdirectory
	// of it swapped for a symlink to outside.
	h, swapped := holder(t, root)
	h.Process.Kill()
	h.Wait()
	mk := func(name string) string {
		p := filepath.Join(root, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := filepath.Join(root, PrefixSQLite+"link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	other := mk(PrefixSQLite + "other-user")
	if os.Geteuid() == 0 {
		if err := os.Chown(other, 54323, 54323); err != nil {
			t.Fatal(err)
		}
	}
	foreign := mk("pisess-testbin-1")
	fresh := mk(PrefixDryRun + "fresh")
	old := mk(PrefixDryRun + "old")
	twoDaysAgo := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(old, twoDaysAgo, twoDaysAgo); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(swapped, "staging")); err != nil {
		t.Fatal(err)
	}
	removed, err := Sweep(root, PrefixSQLite, PrefixDryRun)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{old: true, swapped: true}
	for _, p := range removed {
		if !want[p] {
			t.Errorf("swept %s", p)
		}
		delete(want, p)
	}
	for p := range want {
		t.Errorf("did not sweep %s", p)
	}
	for _, p := range []string{link, fresh, foreign, canary} {
		if !exists(p) {
			t.Errorf("%s is gone", p)
		}
	}
	if os.Geteuid() == 0 && !exists(other) {
		t.Errorf("another user's %s is gone", other)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink %s was changed: %v", link, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(outside, &st); err != nil {
		t.Errorf("the directory outside: %v", err)
	}
}
