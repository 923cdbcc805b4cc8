package commands

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/ledger"
)

// Helpers of the issue-34 tests (overlap, damage, records, interrupts):
// trees from scripts/gentree and pisess run as a child process (the test
// binary itself, TestMain's envTestMain), which a test can signal, kill or
// run beside another.

// genTree writes a scripts/gentree tree of n sessions, about mb MiB in all,
// into a fresh directory and returns its path.
func genTree(tb testing.TB, n, mb int, seed uint64) string {
	tb.Helper()
	bin := fixtures.BuildCommand(tb, "./scripts/gentree")
	tree := filepath.Join(memTempDir(tb), "sessions")
	out, err := exec.Command(bin, "-out", tree, "-sessions", strconv.Itoa(n), "-mb", strconv.Itoa(mb),
		"-seed", strconv.FormatUint(seed, 10)).CombinedOutput()
	if err != nil {
		tb.Fatalf("gentree: %v\n%s", err, out)
	}
	return tree
}

// copiesTree writes a tree of n sessions in 40 project directories, each
// the bundled example session (11 entries, 2.7 kB) under an id of its own:
// the shape of a large tree at the least cost of making it.
func copiesTree(tb testing.TB, n int) string {
	tb.Helper()
	b, err := os.ReadFile(exampleSession)
	if err != nil {
		tb.Fatal(err)
	}
	const id = "3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b"
	if !bytes.Contains(b, []byte(id)) {
		tb.Fatalf("the example session's id is not %s", id)
	}
	tree := filepath.Join(memTempDir(tb), "sessions")
	for i := range n {
		dir := filepath.Join(tree, fmt.Sprintf("--home-dev-project%02d--", i%40))
		if i < 40 {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				tb.Fatal(err)
			}
		}
		own := fmt.Sprintf("%08x-9a4d-4e6f-8b2a-1c5d7e9f0a1b", i)
		name := filepath.Join(dir, fmt.Sprintf("2026-01-05T10-00-00-000Z_%s.jsonl", own))
		if err := os.WriteFile(name, bytes.Replace(b, []byte(id), []byte(own), 1), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return tree
}

// memTempDir is a fresh directory on tmpfs (/dev/shm) when there is one,
// else t.TempDir(): the trees of thousands of sessions these tests make,
// migrate and remove cost minutes on a loaded disk and seconds in memory,
// and what they test is the order of steps, not the disk.
func memTempDir(tb testing.TB) string {
	tb.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "pisess-test-"); err == nil {
			tb.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return tb.TempDir()
}

// child is pisess running in a child process.
type child struct {
	cmd         *exec.Cmd
	out, err    bytes.Buffer
	done        chan struct{}
	code        int
	signaled    bool // ended by a signal
	started, at time.Time
}

// startChild starts pisess with args; env is added to the test's
// environment (later entries win). PISESS_* variables of the test's own
// environment are never passed on.
func startChild(tb testing.TB, env []string, args ...string) *child {
	tb.Helper()
	c := &child{done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PISESS_") {
			c.cmd.Env = append(c.cmd.Env, kv)
		}
	}
	c.cmd.Env = append(c.cmd.Env, envTestMain+"=1")
	c.cmd.Env = append(c.cmd.Env, env...)
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.err
	if err := c.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c.started = time.Now()
	go func() {
		err := c.cmd.Wait()
		c.at = time.Now()
		c.code = c.cmd.ProcessState.ExitCode()
		if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			c.signaled = true
		}
		_ = err
		close(c.done)
	}()
	tb.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

// runChild runs pisess as a child to its end (at most two minutes).
func runChild(tb testing.TB, env []string, args ...string) *child {
	tb.Helper()
	c := startChild(tb, env, args...)
	c.wait(tb, 2*time.Minute)
	return c
}

// exited reports whether the child has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait waits for the child to end, failing the test after timeout.
func (c *child) wait(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	select {
	case <-c.done:
	case <-time.After(timeout):
		_ = c.cmd.Process.Kill()
		<-c.done
		tb.Fatalf("pisess %v: still running after %v\nstderr:\n%s", c.cmd.Args[1:], timeout, tail(c.err.String(), 2000))
	}
}

func (c *child) String() string {
	return fmt.Sprintf("pisess %v: exit %d\nstdout (%d bytes):\n%s\nstderr (%d bytes):\n%s", c.cmd.Args[1:], c.code,
		c.out.Len(), tail(c.out.String(), 3000), c.err.Len(), tail(c.err.String(), 3000))
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// waitUntil polls cond every 10 ms until it holds, failing the test after
// timeout.
func waitUntil(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("waited %v for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sidecars counts the installed sidecars (<stem>.v2) of a gentree tree.
func sidecars(tree string) int {
	m, _ := filepath.Glob(filepath.Join(tree, "--*--", "*.v2"))
	return len(m)
}

// regularFiles counts the regular files under dir (0 when it is missing).
func regularFiles(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// runRecords are the tree journal's records of one run.
func runRecords(tb testing.TB, tree, id string) []ledger.Record {
	tb.Helper()
	j, err := ledger.OpenJournal(tree)
	if err != nil {
		tb.Fatal(err)
	}
	defer j.Close()
	recs, err := j.Records(id)
	if err != nil {
		tb.Fatal(err)
	}
	return recs
}

// reportDoc decodes a --json document (envelope or error document) into a
// generic map.
func reportDoc(tb testing.TB, stdout string) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		tb.Fatalf("stdout is not one JSON document: %v\n%s", err, tail(stdout, 2000))
	}
	return m
}

// path returns the value at a path of keys and indexes in a decoded JSON
// document, nil when it is missing.
func jsonAt(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}
