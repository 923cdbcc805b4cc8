package commands

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"pisess/ledger"
	"pisess/writers/durable"
	"strings"
	"testing"
	"time"
)

func TestGlobalHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := pisess(t, args...)
		if r.code != ExitClean {
			t.Fatalf("%v: %s", args, r)
		}
		for _, want := range []string{"PISESS_CLOCK", "2026-01-01T00:00:00.000Z", "PI_SESSIONS_DIR", "PI_CODING_AGENT_DIR",
			"EXIT STATUS", "16  usage error", "32  the session tree is locked", "inspect", "build", "--log-format", "--log-file", "--log-level"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%v: help lacks %q:\n%s", args, want, r.stdout)
			}
		}
	}
}

func TestCommandHelpEndsWithExitStatus(t *testing.T) {
	for _, name := range []string{"inspect", "build"} {
		for _, args := range [][]string{{name, "--help"}, {"help", name}} {
			r := pisess(t, args...)
			if r.code != ExitClean {
				t.Fatalf("%v: %s", args, r)
			}
			help := strings.TrimRight(r.stdout, "\n")
			i := strings.LastIndex(help, "EXIT STATUS:")
			if i < 0 {
				t.Fatalf("%v: no EXIT STATUS section:\n%s", args, help)
			}
			tail := help[i:]
			if strings.Count(tail, "\n\n") > 0 || !strings.Contains(tail, "16  usage error") {
				t.Errorf("%v: EXIT STATUS is not the last section, or lacks 16:\n%s", args, help)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "exists")
	if err := os.Mkdir(existing, 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  string // PISESS_CLOCK
		args []string
	}{
		{"no command", "", nil},
		{"unknown command", "", []string{"frobnicate"}},
		{"help for unknown command", "", []string{"help", "frobnicate"}},
		{"unknown global flag", "", []string{"--bogus", "inspect", dir}},
		{"unknown command flag", "", []string{"inspect", "--bogus", dir}},
		{"inspect without STORE", "", []string{"inspect"}},
		{"inspect with two stores", "", []string{"inspect", dir, dir}},
		{"build with one argument", "", []string{"build", exampleSession}},
		{"bad log format", "", []string{"--log-format", "xml", "inspect", dir}},
		{"bad log level", "", []string{"--log-level", "loud", "inspect", dir}},
		{"bad PISESS_CLOCK", "yesterday", []string{"build", exampleSession, filepath.Join(dir, "a.v2")}},
		{"segment size over 64 MiB", "", []string{"build", "--max-segment-bytes", "67108865", exampleSession, filepath.Join(dir, "b.v2")}},
		{"segment size zero", "", []string{"build", "--max-segment-bytes", "0", exampleSession, filepath.Join(dir, "c.v2")}},
		{"segment size not a number", "", []string{"build", "--max-segment-bytes", "big", exampleSession, filepath.Join(dir, "d.v2")}},
		{"OUTDIR exists", "", []string{"build", exampleSession, existing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvClock, tt.env)
			r := pisess(t, tt.args...)
			if r.code != ExitUsage {
				t.Fatalf("want exit %d: %s", ExitUsage, r)
			}
			if r.stdout != "" {
				t.Errorf("stdout not empty without --json: %q", r.stdout)
			}
			if !strings.HasPrefix(r.stderr, "pisess: ") {
				t.Errorf("stderr lacks the error line: %q", r.stderr)
			}
			// The same failure with --json is one JSON object on stdout.
			if len(tt.args) > 0 && tt.args[0] != "help" && !strings.HasPrefix(tt.args[0], "--") && tt.args[0] != "frobnicate" {
				jargs := append([]string{tt.args[0], "--json"}, tt.args[1:]...)
				jr := pisess(t, jargs...)
				if jr.code != ExitUsage {
					t.Fatalf("--json: want exit %d: %s", ExitUsage, jr)
				}
				checkErrorObject(t, jr, ClassUsage)
			}
		})
	}
}

// checkErrorObject asserts stdout is exactly
// {"schema":"pisess.report.v1","error":{"class","message"}}, valid
// against the published schema.
func checkErrorObject(t *testing.T, r result, class string) {
	t.Helper()
	obj := r.jsonObject(t)
	if len(obj) != 2 || obj["schema"] != ReportSchema {
		t.Fatalf("error object is not {schema, error}: %v", obj)
	}
	validateReport(t, r.stdout)
	e, ok := obj["error"].(map[string]any)
	if !ok || len(e) != 2 {
		t.Fatalf("error member is not {class, message}: %v", obj)
	}
	if e["class"] != class {
		t.Errorf("class = %v, want %s", e["class"], class)
	}
	if m, _ := e["message"].(string); m == "" {
		t.Errorf("empty message: %v", e)
	}
	if r.stderr != "" && strings.Contains(r.stderr, "pisess: ") {
		t.Errorf("--json run also printed the error on stderr: %q", r.stderr)
	}
}

func TestClockFromEnv(t *testing.T) {
	t.Setenv(EnvClock, fixedClock)
	clock, err := ClockFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if got := clock().Format("2006-01-02T15:04:05.000Z07:00"); got != fixedClock {
		t.Errorf("fixed clock = %s, want %s", got, fixedClock)
	}
	t.Setenv(EnvClock, "2026-03-04T05:06:07.5+02:00")
	clock, err = ClockFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if got := clock().Format("2006-01-02T15:04:05.000Z07:00"); got != "2026-03-04T03:06:07.500Z" {
		t.Errorf("offset clock = %s, want UTC", got)
	}
	t.Setenv(EnvClock, "")
	clock, err = ClockFromEnv()
	if err != nil || clock().IsZero() {
		t.Errorf("unset clock: %v", err)
	}
	for _, bad := range []string{"2026-01-01", "now", "2026-01-01 00:00:00Z"} {
		t.Setenv(EnvClock, bad)
		if _, err := ClockFromEnv(); ExitCode(nil, err) != ExitUsage {
			t.Errorf("PISESS_CLOCK=%q: err %v, want a usage error", bad, err)
		}
	}
}

func TestProgressIsNoOpOffTerminal(t *testing.T) {
	var b strings.Builder
	p := NewProgress(&b, 10, "x")
	p.Add(5)
	p.Describe("y")
	p.Finish()
	bp := NewBytesProgress(&b, -1, "z")
	bp.Add(100)
	bp.Finish()
	if b.Len() != 0 {
		t.Errorf("progress wrote to a non-terminal: %q", b.String())
	}
}

func TestLogging(t *testing.T) {
	store := buildStore(t)
	r := pisess(t, "--log-format", "json", "--log-level", "debug", "inspect", store)
	if r.code != ExitClean {
		t.Fatalf("%s", r)
	}
	if strings.Contains(r.stdout, `"level"`) || !strings.Contains(r.stdout, "no problems found") {
		t.Errorf("logs on stdout, or the report not there: %q", r.stdout)
	}
	if strings.Contains(r.stderr, "no problems found") {
		t.Errorf("the report on stderr: %q", r.stderr)
	}
	file := filepath.Join(t.TempDir(), "pisess.log")
	r = pisess(t, "--log-file", file, "--log-format", "json", "--log-level", "debug", "build", "--force", exampleSession, store)
	if r.code != ExitClean {
		t.Fatalf("%s", r)
	}
	log, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `"level":"debug"`) || strings.Contains(r.stderr, `"level"`) {
		t.Errorf("debug logs not in the log file only:\nfile: %s\nstderr: %s", log, r.stderr)
	}
}

// TestBadInputOneAnswer: the same bad input gets the same, explained
// answer from every command.
func TestBadInputOneAnswer(t *testing.T) {
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	t.Run("invalid PISESS_CLOCK is usage for every command", func(t *testing.T) {
		t.Setenv(EnvClock, "yesterday")
		for _, args := range [][]string{{"status", root}, {"verify", root}, {"fsck", root}, {"migrate", "--dry-run", root}, {"upgrade", "--dry-run", root}, {"inspect", root}} {
			if r := pisess(t, args...); r.code != ExitUsage || !strings.Contains(r.stderr, EnvClock) {
				t.Errorf("%v: %s", args, r)
			}
		}
	})
	t.Run("inspect of a directory that is not a store", func(t *testing.T) {
		if r := pisess(t, "inspect", filepath.Join(root, "--p--")); r.code != ExitOperational || !strings.Contains(r.stderr, "not a V2 store") {
			t.Errorf("%s", r)
		}
	})
	t.Run("a duration that does not parse shows an example", func(t *testing.T) {
		if r := pisess(t, "migrate", "--lock-timeout", "5", root); r.code != ExitUsage || !strings.Contains(r.stderr, "such as 5s") {
			t.Errorf("%s", r)
		}
	})
	t.Run("an unopenable log file is operational", func(t *testing.T) {
		if r := pisess(t, "--log-file", filepath.Join(root, "no", "such", "dir", "log"), "status", root); r.code != ExitOperational {
			t.Errorf("%s", r)
		}
	})
	t.Run("flags after the command and after the paths", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "l.json")
		r := pisess(t, "status", root, "--log-format", "json", "--log-file", log, "--json")
		if r.code != ExitClean || !strings.HasPrefix(strings.TrimSpace(r.stdout), "{") {
			t.Fatalf("%s", r)
		}
		if b, _ := os.ReadFile(log); !strings.Contains(string(b), `"run started"`) {
			t.Errorf("log file: %q", b)
		}
	})
}

// TestJSONProgress: --json-progress streams one JSON line per session done
// on stderr (a plan line first), while stdout keeps the one report.
func TestJSONProgress(t *testing.T) {
	root, session := placeSession(t, exampleSession, "s.jsonl")
	b, _ := os.ReadFile(exampleSession)
	if err := os.WriteFile(filepath.Join(filepath.Dir(session), "t.jsonl"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := pisess(t, "migrate", "--json", "--json-progress", "--correlation-id", "progress-run-01", root)
	if r.code != ExitClean {
		t.Fatalf("%s", r)
	}
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("stderr line is not JSON: %q", line)
		}
		if l["schema"] != ProgressSchema || l["correlationId"] != "progress-run-01" {
			t.Errorf("progress line %v", l)
		}
		types = append(types, l["message_type"].(string))
		if l["message_type"] == "session" && (l["path"] == "" || l["outcome"] != "done" || l["total"] != float64(2)) {
			t.Errorf("session line %v", l)
		}
	}
	if strings.Join(types, ",") != "plan,session,session,summary" {
		t.Errorf("progress lines %v, want plan, one per session, summary", types)
	}

	// A run over sessions it skips (fresh) and refuses counts their bytes
	// in neither bytesTotal nor bytesDone (validateProgress checks that
	// bytesDone never passes bytesTotal, and reaches it), and its summary
	// carries the report's totals and exit status.
	if err := os.WriteFile(filepath.Join(filepath.Dir(session), "u.jsonl"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	refused, err := os.ReadFile(refusedSession)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(session), "r.jsonl"), refused, 0o600); err != nil {
		t.Fatal(err)
	}
	r = pisess(t, "migrate", "--json-progress", root)
	if r.code != ExitClean {
		t.Fatalf("%s", r)
	}
	lines := validateProgress(t, r.stderr)
	plan, sum := lines[0], lines[len(lines)-1]
	// The new sessions are planned as migrations (one turns out refused
	// when read); the two fresh ones are not work.
	if want := fmt.Sprint(len(b) + len(refused)); plan["total"] != json.Number("4") || plan["bytesTotal"] != json.Number(want) {
		t.Errorf("plan %v: want 4 sessions and the bytes of the two new ones (%s)", plan, want)
	}
	totals, _ := sum["totals"].(map[string]any)
	if sum["exitStatus"] != json.Number("0") || totals["migrated"] != json.Number("1") || totals["skipped"] != json.Number("2") || totals["refused"] != json.Number("1") {
		t.Errorf("summary %v", sum)
	}
}

// TestNotASessionOneAnswer: a .jsonl that is not a session, named or
// found in a tree, is reported by every command as a notice, exit 0.
func TestNotASessionOneAnswer(t *testing.T) {
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	notes := filepath.Join(root, "--p--", "notes.jsonl")
	if err := os.WriteFile(notes, []byte("{\"not\":\"a session\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"migrate", "-n"}, {"status"}, {"verify"}, {"fsck"}, {"upgrade", "-n"}} {
		for _, p := range []string{root, notes} {
			r := pisess(t, append(cmd, p)...)
			if r.code != ExitClean || !strings.Contains(r.stdout, "notice: --p--/notes.jsonl: skipped, not a session") {
				t.Errorf("%v %s: %s", cmd, p, r)
			}
			j := pisess(t, append(cmd, "--json", p)...).envelope(t)
			if j["totals"].(map[string]any)["skippedEntries"] != float64(1) {
				t.Errorf("%v %s --json: skippedEntries %v", cmd, p, j["totals"])
			}
		}
	}
}

// TestLockWaitEverywhere: rollback and upgrade, like migrate, fsck and
// prune, exit 32 at once on a locked tree, or wait with --lock-wait.
func TestLockWaitEverywhere(t *testing.T) {
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	if r := pisess(t, "migrate", "--correlation-id", "lockwait-run-01", root); r.code != ExitClean {
		t.Fatalf("migrate: %s", r)
	}
	if err := os.WriteFile(filepath.Join(root, "--p--", "old.jsonl"), []byte(legacySession), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"rollback", "--tree", root, "lockwait-run-01"}, {"upgrade", root}} {
		l, _, err := durable.OS.TryLockTree(ledger.TreeLockPath(root))
		if err != nil {
			t.Fatal(err)
		}
		if r := pisess(t, args...); r.code != ExitLocked {
			t.Errorf("%v on a locked tree: %s", args, r)
		}
		go func() { time.Sleep(300 * time.Millisecond); l.Unlock() }()
		if r := pisess(t, append(args, "--lock-wait", "10s")...); r.code != ExitClean {
			t.Errorf("%v --lock-wait: %s", args, r)
		}
	}
}
