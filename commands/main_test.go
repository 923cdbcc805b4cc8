package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fixedClock is the clock the reference vectors were written with.
const fixedClock = "2026-01-01T00:00:00.000Z"

// result is what one in-process run of pisess produced.
type result struct {
	code           int
	stdout, stderr string
}

// pisess runs Main in-process with args (without the program name).
func pisess(tb testing.TB, args ...string) result {
	tb.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), append([]string{"pisess"}, args...), &out, &errb)
	if wantsJSON(append([]string{"pisess"}, args...)) && out.Len() > 0 {
		// Every --json document of every test follows the schema.
		validateReport(tb, out.String())
	}
	if slices.Contains(args, "--json-progress") {
		// And so does every progress stream.
		validateProgress(tb, errb.String())
	}
	// No JSON line pisess writes (logs, progress) holds a key twice.
	checkJSONLines(tb, "stderr", errb.String())
	if log := logFileOf(args); log != "" {
		if b, err := os.ReadFile(log); err == nil {
			checkJSONLines(tb, log, string(b))
		}
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// jsonObject decodes stdout as exactly one JSON object and returns the
// command's own report (the envelope's detail), or the error document.
func (r result) jsonObject(tb testing.TB) map[string]any {
	tb.Helper()
	obj := r.envelope(tb)
	if d, ok := obj["detail"].(map[string]any); ok {
		return d
	}
	return obj
}

// envelope decodes stdout as exactly one JSON object, on one line.
func (r result) envelope(tb testing.TB) map[string]any {
	tb.Helper()
	return decodeOne(tb, r.stdout, r.stderr)
}

func decodeOne(tb testing.TB, stdout, stderr string) map[string]any {
	tb.Helper()
	if strings.Count(strings.TrimSuffix(stdout, "\n"), "\n") != 0 {
		tb.Fatalf("--json output is not one line: %q", stdout)
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		tb.Fatalf("stdout is not a JSON object: %v\nstdout: %q\nstderr: %s", err, stdout, stderr)
	}
	if dec.More() {
		tb.Fatalf("stdout holds more than one JSON value: %q", stdout)
	}
	return obj
}

// detail returns the command's own report (the envelope's detail) as
// JSON, to decode into the engine's report type.
func detail(tb testing.TB, stdout string) []byte {
	tb.Helper()
	var env struct {
		Detail json.RawMessage `json:"detail"`
	}
	if err := json.Unmarshal([]byte(stdout), &env); err != nil || len(env.Detail) == 0 {
		tb.Fatalf("stdout is not a report envelope: %v\n%s", err, stdout)
	}
	return env.Detail
}

func (r result) String() string {
	return "exit " + itoa(r.code) + "\nstdout:\n" + r.stdout + "\nstderr:\n" + r.stderr
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// exampleSession is the bundled copy of vectors/accept/tricky.
const exampleSession = "../fixtures/example/sessions/--home-u-proj--/2026-01-05T10-00-00-000Z_3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b.jsonl"

// refusedSession is the bundled real-pi session with a custom_message entry.
const refusedSession = "../fixtures/example/sessions/--home-dev-projects-demo--/2026-11-21T22-04-12-987Z_01a20023-733b-73a5-aff4-aebbd7d1fdba.jsonl"

// placeSession copies the bundled session src into a fresh tree as
// <root>/--p--/<name> and returns the tree's root and the copy's path.
func placeSession(tb testing.TB, src, name string) (root, session string) {
	tb.Helper()
	root = tb.TempDir()
	dir := filepath.Join(root, "--p--")
	if err := os.Mkdir(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	session = filepath.Join(dir, name)
	if err := os.WriteFile(session, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return root, session
}

// buildStore builds the example session into a fresh store and returns its
// path.
func buildStore(tb testing.TB) string {
	tb.Helper()
	tb.Setenv(EnvClock, fixedClock)
	dir := filepath.Join(tb.TempDir(), "session.v2")
	if r := pisess(tb, "build", exampleSession, dir); r.code != ExitClean {
		tb.Fatalf("build: %s", r)
	}
	return dir
}
