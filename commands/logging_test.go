package commands

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pisess/fixtures"
	"pisess/readers/discover"
)

// needRoot: the test switches users, as root does over users' trees.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("switches to other uids: run the tests as root")
	}
}

// userTree is a tree of the example session that belongs to hostileUID,
// in a directory that user can reach, with a home directory of theirs
// beside it.
func userTree(t *testing.T) (tree, home string) {
	t.Helper()
	base := t.TempDir()
	for d := base; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tree, home = filepath.Join(base, "sessions"), filepath.Join(base, "home")
	b, err := os.ReadFile(exampleSession)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(tree, "--p--"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "--p--", "s.jsonl"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{tree, filepath.Join(tree, "--p--"), filepath.Join(tree, "--p--", "s.jsonl"), home} {
		if err := os.Chown(p, hostileUID, hostileUID); err != nil {
			t.Fatal(err)
		}
	}
	return tree, home
}

// pisessAs runs pisess (this test binary, as main) in a child process as
// uid, with exactly env besides what makes it pisess, from /.
func pisessAs(t *testing.T, uid int, env []string, args ...string) result {
	t.Helper()
	// /proc/self/exe: uid may not search the directory of the test binary.
	return runAs(t, uid, append(append([]string{}, env...), envTestMain+"=1"), "/", "/proc/self/exe", append([]string{"pisess"}, args...))
}

// runAs runs path with argv (argv[0] its name) as uid (its own group,
// no other), with exactly env, in dir.
func runAs(t *testing.T, uid int, env []string, dir, path string, argv []string) result {
	t.Helper()
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env, cmd.Dir = env, dir
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %v as uid %d: %v", argv, uid, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// logRecords reads a JSON log and returns its lines; each must be a
// record of pisess's.
func logRecords(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.IndexByte(b, 0) >= 0 {
		t.Fatalf("%s holds NUL bytes (written at a stale offset): %q", path, b)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.HasPrefix(l, `{"level":`) {
			t.Fatalf("%s: not a JSON log record: %q", path, l)
		}
		lines = append(lines, l)
	}
	return lines
}

// countRuns counts the runs a log holds (their summary records).
func countRuns(lines []string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, `"message":"run finished"`) {
			n++
		}
	}
	return n
}

func mode(t *testing.T, path string) (fs.FileMode, uint32) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid
}

// TestDefaultLogOfAUser (issue 35, item 3): without --log-file, a user's
// runs log to $XDG_STATE_HOME/pisess/pisess.log, else
// ~/.local/state/pisess/pisess.log, in a directory made 0700 and a file
// 0600, theirs; cron's -q still prints nothing; commands that do not act
// on trees make no log.
func TestDefaultLogOfAUser(t *testing.T) {
	needRoot(t)
	tree, home := userTree(t)
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
	r := pisessAs(t, hostileUID, env, "version")
	r2 := pisessAs(t, hostileUID, env, "completion", "bash")
	if r.code != 0 || r2.code != 0 {
		t.Fatalf("version: %s\ncompletion: %s", r, r2)
	}
	if _, err := os.Lstat(filepath.Join(home, ".local")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a command that does not act on trees made %s/.local (%v)", home, err)
	}

	r = pisessAs(t, hostileUID, env, "migrate", "-q", "--log-format", "json", tree)
	if r.code != ExitClean || r.stdout != "" || r.stderr != "" {
		t.Fatalf("migrate -q: %s", r)
	}
	dir := filepath.Join(home, ".local", "state", "pisess")
	log := filepath.Join(dir, "pisess.log")
	lines := logRecords(t, log)
	if countRuns(lines) != 1 || !strings.Contains(lines[0], `"message":"run started"`) || !strings.Contains(strings.Join(lines, "\n"), `"outcome":"done"`) {
		t.Fatalf("the default log does not hold the run: %q", lines)
	}
	if m, uid := mode(t, dir); m.Perm() != 0o700 || uid != hostileUID {
		t.Errorf("%s: mode %v, owner %d; want 0700, %d", dir, m, uid, hostileUID)
	}
	if m, uid := mode(t, log); m.Perm() != 0o600 || uid != hostileUID {
		t.Errorf("%s: mode %v, owner %d; want 0600, %d", log, m, uid, hostileUID)
	}

	// XDG_STATE_HOME, when set, is where state goes.
	state := filepath.Join(home, "state")
	r = pisessAs(t, hostileUID, append(env, "XDG_STATE_HOME="+state), "status", "-q", "--log-format", "json", tree)
	if r.code != ExitClean || r.stdout != "" || r.stderr != "" {
		t.Fatalf("status -q: %s", r)
	}
	if n := countRuns(logRecords(t, filepath.Join(state, "pisess", "pisess.log"))); n != 1 {
		t.Errorf("$XDG_STATE_HOME/pisess/pisess.log holds %d runs, want 1", n)
	}
	if n := countRuns(logRecords(t, log)); n != 1 {
		t.Errorf("~/.local/state/pisess/pisess.log holds %d runs, want 1 (the status run went elsewhere)", n)
	}
}

// TestDefaultLogCannotOpen: a default log that cannot be made is one
// warning on stderr, and the run does its work and exits as it would
// have; an explicit --log-file that cannot be opened fails the run.
func TestDefaultLogCannotOpen(t *testing.T) {
	needRoot(t)
	tree, _ := userTree(t)
	// A home the user cannot write to.
	home := filepath.Join(filepath.Dir(tree), "roots-home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	r := pisessAs(t, hostileUID, []string{"HOME=" + home}, "migrate", "-q", tree)
	if r.code != ExitClean || r.stdout != "" {
		t.Fatalf("migrate: %s", r)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "pisess: warning: default log: create "+filepath.Join(home, ".local", "state", "pisess")) {
		t.Fatalf("want one warning naming the log directory, got %q", r.stderr)
	}
	if _, err := os.Lstat(discover.SidecarPath(filepath.Join(tree, "--p--", "s.jsonl"))); err != nil {
		t.Fatalf("the run did not do its work: %v", err)
	}
	r = pisessAs(t, hostileUID, []string{"HOME=" + home}, "status", "-q", "--log-file", filepath.Join(home, "pisess.log"), tree)
	if r.code != ExitOperational || !strings.Contains(r.stderr, "--log-file") {
		t.Fatalf("an unopenable --log-file: %s", r)
	}
}

// TestDefaultLogOfRoot: root's default log is /var/log/pisess/pisess.log
// whatever HOME and XDG_STATE_HOME say (under sudo -E they are a user's,
// who could plant a link there); PISESS_LOG_DIR moves it, and a missing
// directory is made 0750.
func TestDefaultLogOfRoot(t *testing.T) {
	needRoot(t)
	t.Setenv(EnvLogDir, "") // restored afterwards
	os.Unsetenv(EnvLogDir)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	if dir, m, err := defaultLogDir(); err != nil || dir != "/var/log/pisess" || m != 0o750 {
		t.Fatalf("root's default log directory: %q %v %v", dir, m, err)
	}
	dir := filepath.Join(t.TempDir(), "log", "pisess")
	t.Setenv(EnvLogDir, dir)
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	if r := pisess(t, "status", "-q", "--log-format", "json", root); r.code != ExitClean || r.stdout != "" || r.stderr != "" {
		t.Fatalf("status: %s", r)
	}
	if m, _ := mode(t, dir); m.Perm() != 0o750 {
		t.Errorf("%s made %v, want 0750", dir, m.Perm())
	}
	if n := countRuns(logRecords(t, filepath.Join(dir, "pisess.log"))); n != 1 {
		t.Errorf("the log holds %d runs, want 1", n)
	}
}

// TestDefaultLogRootOverUserTree: root's run over a user's tree logs to
// root's default log, which the child run as the owner writes through the
// descriptor root opened (the owner cannot open it); nothing is logged in
// the owner's home.
func TestDefaultLogRootOverUserTree(t *testing.T) {
	needRoot(t)
	tree, home := userTree(t)
	dir := filepath.Join(t.TempDir(), "rootlog")
	t.Setenv(EnvLogDir, dir)
	t.Setenv("HOME", home)
	if r := pisess(t, "migrate", "-q", "--log-format", "json", tree); r.code != ExitClean || r.stdout != "" || r.stderr != "" {
		t.Fatalf("migrate: %s", r)
	}
	lines := logRecords(t, filepath.Join(dir, "pisess.log"))
	if countRuns(lines) != 1 || !strings.Contains(strings.Join(lines, "\n"), `"outcome":"done"`) {
		t.Fatalf("root's log does not hold the owner's run: %q", lines)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("the owner's home got %v", entries)
	}
}

// TestLogRotation (issue 35, item 3): each run opens its log anew, for
// appending, so both of logrotate's ways work: create (the log renamed,
// the next run makes a new one) and copytruncate (the log copied and
// truncated, the next run writes from its start: no hole of NUL bytes at
// the old offset). For --log-file, the default log, and the default log
// of root over a user's tree (the child writes through root's descriptor).
func TestLogRotation(t *testing.T) {
	needRoot(t)
	for _, c := range []struct {
		name    string
		userRun bool // root over a user's tree
		flag    bool // --log-file rather than the default log
	}{{"--log-file", false, true}, {"default log", false, false}, {"default log, root over a user's tree", true, false}} {
		for _, how := range []string{"create", "copytruncate"} {
			t.Run(c.name+", "+how, func(t *testing.T) {
				tree, _ := placeSession(t, exampleSession, "s.jsonl")
				if c.userRun {
					tree, _ = userTree(t)
				}
				dir := t.TempDir()
				t.Setenv(EnvLogDir, dir)
				log := filepath.Join(dir, "pisess.log")
				args := []string{"status", "-q", "--log-format", "json", tree}
				if c.flag {
					log = filepath.Join(t.TempDir(), "explicit.log")
					args = append(args, "--log-file", log)
				}
				run := func() {
					t.Helper()
					if r := pisess(t, args...); r.code != ExitClean || r.stdout != "" || r.stderr != "" {
						t.Fatalf("%s", r)
					}
				}
				run()
				first := logRecords(t, log)
				rotated := log + ".1"
				switch how {
				case "create":
					if err := os.Rename(log, rotated); err != nil {
						t.Fatal(err)
					}
				case "copytruncate":
					copyFile(t, log, rotated)
					if err := os.Truncate(log, 0); err != nil {
						t.Fatal(err)
					}
				}
				run()
				if got := logRecords(t, rotated); strings.Join(got, "\n") != strings.Join(first, "\n") {
					t.Errorf("the rotated log changed: %q", got)
				}
				if n := countRuns(logRecords(t, log)); n != 1 {
					t.Errorf("the log after rotation holds %d runs, want 1", n)
				}
			})
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultLogLimit: a default log over its limit is moved to
// pisess.log.old (replacing the previous one) by the next run, which
// starts a new one: no logrotate watches a user's log, and it stays
// bounded.
func TestDefaultLogLimit(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvLogDir, dir)
	defer func(n int64) { defaultLogLimit = n }(defaultLogLimit)
	defaultLogLimit = 4096
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	log := filepath.Join(dir, "pisess.log")
	old := strings.Repeat(`{"level":"info","message":"an old record"}`+"\n", 100)
	if err := os.WriteFile(log, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log+".old", []byte("the generation before\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := pisess(t, "status", "-q", "--log-format", "json", root); r.code != ExitClean || r.stderr != "" {
		t.Fatalf("%s", r)
	}
	if b, _ := os.ReadFile(log + ".old"); string(b) != old {
		t.Errorf("pisess.log.old is not the full log: %d bytes", len(b))
	}
	lines := logRecords(t, log)
	if countRuns(lines) != 1 || len(lines) != 2 {
		t.Errorf("the new log: %q", lines)
	}
	// Under the limit, a log is appended to.
	if r := pisess(t, "status", "-q", "--log-format", "json", root); r.code != ExitClean {
		t.Fatalf("%s", r)
	}
	if n := countRuns(logRecords(t, log)); n != 2 {
		t.Errorf("the log holds %d runs, want 2", n)
	}
}

// TestLogCopytruncateDuringRun: logrotate's copytruncate may truncate the
// log while a run writes to it (a run that waits for pi's session lock,
// here): the run's next records go to the start of the truncated file, as
// O_APPEND writes do, not to the offset it had reached (which would leave
// a hole of NUL bytes before them).
func TestLogCopytruncateDuringRun(t *testing.T) {
	for _, flag := range []bool{true, false} {
		name := "default log"
		if flag {
			name = "--log-file"
		}
		t.Run(name, func(t *testing.T) {
			root, session := placeSession(t, exampleSession, "s.jsonl")
			dir := t.TempDir()
			t.Setenv(EnvLogDir, dir)
			log := filepath.Join(dir, "pisess.log")
			args := []string{"migrate", "-q", "--log-format", "json", "--lock-timeout", "1m", root}
			if flag {
				log = filepath.Join(t.TempDir(), "explicit.log")
				args = append(args, "--log-file", log)
			}
			var rotated []byte
			r := fixtures.WhileLockHeld(t, session+".lock", func() result { return pisess(t, args...) },
				func() bool {
					b, _ := os.ReadFile(log)
					return bytes.Contains(b, []byte(`"run started"`))
				},
				func() bool {
					// copytruncate, while the run waits for the lock.
					rotated, _ = os.ReadFile(log)
					return os.Truncate(log, 0) == nil
				})
			if r.code != ExitClean || r.stdout != "" || r.stderr != "" {
				t.Fatalf("%s", r)
			}
			lines := logRecords(t, log)
			if countRuns(lines) != 1 || strings.Contains(strings.Join(lines, "\n"), `"run started"`) {
				t.Fatalf("after the truncation the log holds %q", lines)
			}
			if !bytes.Contains(rotated, []byte(`"run started"`)) {
				t.Fatalf("the copy: %q", rotated)
			}
		})
	}
}
