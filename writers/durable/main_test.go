package durable

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv names the helper a re-executed test binary runs instead of the
// tests (the os/exec GO_WANT_HELPER_PROCESS pattern): a second process is
// the only honest way to test flock, stale locks and SIGKILL.
const helperEnv = "GO_WANT_HELPER_PROCESS"

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		if err := runHelper(name, os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runHelper is the child side. Lock holders print "locked" once they hold
// the lock and keep it until their stdin closes.
func runHelper(name string, args []string) error {
	ctx := context.Background()
	switch name {
	case "hold-lock":
		l, err := OS.LockFile(ctx, args[0], 10*time.Second)
		if err != nil {
			return err
		}
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin)
		return l.Unlock()
	case "hold-tree-lock":
		l, _, err := OS.TryLockTree(args[0])
		if err != nil {
			return err
		}
		if len(args) < 3 || args[2] != "unrecorded" {
			if err := l.RecordHolder("helper-run-0001"); err != nil {
				return err
			}
		}
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin)
		if args[1] == "die" {
			os.Exit(3) // no Unlock: the holder text stays behind
		}
		return l.Unlock()
	case "atomic-write": // dir tmpDir data name...
		for _, n := range args[3:] {
			if err := OS.WriteFileAtomic(args[0], args[1], n, []byte(args[2]), 0o600); err != nil {
				return err
			}
		}
		return nil
	case "in-place": // path data
		return OS.WriteFileInPlace(args[0], []byte(args[1]), 0o600)
	case "append": // path line
		return OS.AppendLine(args[0], []byte(args[1]+"\n"))
	case "rename": // old new
		return OS.Rename(args[0], args[1])
	}
	return fmt.Errorf("unknown helper %q", name)
}

// helper is a running child holding a lock.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startHolder starts the helper name and waits until it prints "locked".
func startHolder(t *testing.T, name string, args ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+name)
	cmd.Stderr = os.Stderr
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
	h := &helper{cmd: cmd, stdin: stdin}
	t.Cleanup(func() { h.stdin.Close(); h.cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper %s: got %q, %v", name, line, err)
	}
	return h
}

// release closes the child's stdin and waits for it to exit.
func (h *helper) release(t *testing.T) {
	t.Helper()
	h.stdin.Close()
	err := h.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
		return // "die" helper
	}
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
}

// withUmask runs the rest of the test under umask mask. Tests using it are
// not parallel: the umask is per process.
func withUmask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// store makes <tmp>/store with a tmp/ inside, the layout of a V2 store.
func store(t *testing.T) (dir, tmpDir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "store")
	tmpDir = filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmpDir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir, tmpDir
}

// tracing returns OS with write, sync and rename recorded as
// "write <base>", "sync <base>", "rename <base> <base>".
func tracing(log *[]string) Ops {
	o := OS
	o.Write = func(f *os.File, b []byte) (int, error) {
		*log = append(*log, "write "+filepath.Base(f.Name()))
		return OS.Write(f, b)
	}
	o.Sync = func(f *os.File) error {
		*log = append(*log, "sync "+filepath.Base(f.Name()))
		return OS.Sync(f)
	}
	o.RenameAt = func(oldpath, newpath string, noReplace bool) error {
		*log = append(*log, "rename "+filepath.Base(oldpath)+" "+filepath.Base(newpath))
		return OS.RenameAt(oldpath, newpath, noReplace)
	}
	return o
}
