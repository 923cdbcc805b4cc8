package commands

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var (
	reportSchemaOnce sync.Once
	reportSchema     *jsonschema.Schema
	reportSchemaErr  error
)

// validateReport checks one --json document against the published schema
// (report.v1.schema.json).
func validateReport(tb testing.TB, stdout string) {
	tb.Helper()
	reportSchemaOnce.Do(func() {
		f, err := os.Open("report.v1.schema.json")
		if err != nil {
			reportSchemaErr = err
			return
		}
		defer f.Close()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			reportSchemaErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource("report.v1.schema.json", doc); err != nil {
			reportSchemaErr = err
			return
		}
		reportSchema, reportSchemaErr = c.Compile("report.v1.schema.json")
	})
	if reportSchemaErr != nil {
		tb.Fatalf("report schema: %v", reportSchemaErr)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(stdout))
	if err != nil {
		tb.Fatalf("--json output is not JSON: %v\n%s", err, stdout)
	}
	if err := reportSchema.Validate(inst); err != nil {
		tb.Fatalf("--json output does not follow %s: %v\n%s", ReportSchema, err, stdout)
	}
}

// TestEveryCommandsJSONFollowsTheSchema runs every command with --json, on
// clean and damaged trees, and validates each document against the
// published schema; the envelope says which command ran, with its exit
// status, and lists items under the same keys.
func TestEveryCommandsJSONFollowsTheSchema(t *testing.T) {
	root, session := placeSession(t, exampleSession, "s.jsonl")
	refused := filepath.Join(filepath.Dir(session), "r.jsonl")
	b, err := os.ReadFile(refusedSession)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(refused, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvClock, fixedClock)
	store := filepath.Join(t.TempDir(), "built.v2")
	steps := []struct {
		args []string
		code int
	}{
		{[]string{"status", root}, ExitClean},
		{[]string{"migrate", "-n", root}, ExitClean},
		{[]string{"migrate", "--correlation-id", "schema-run-0001", root}, ExitClean},
		{[]string{"verify", root}, ExitClean},
		{[]string{"fsck", root}, ExitClean},
		{[]string{"runs", root}, ExitClean},
		{[]string{"upgrade", root}, ExitClean},
		{[]string{"inspect", filepath.Join(filepath.Dir(session), "s.v2")}, ExitClean},
		{[]string{"build", session, store}, ExitClean},
		{[]string{"rollback", "--tree", root, "schema-run-0001"}, ExitClean},
		{[]string{"rollback", "--tree", root, "unknown-run-0001"}, ExitProblems},
		{[]string{"prune", "--keep-within", "1h", root}, ExitClean},
		{[]string{"migrate", "--bogus"}, ExitUsage},
		{[]string{"fsck", filepath.Join(root, "nope")}, ExitOperational},
	}
	for _, st := range steps {
		r := pisess(t, append(st.args, "--json")...)
		if r.code != st.code {
			t.Fatalf("%v: exit %d, want %d: %s", st.args, r.code, st.code, r)
		}
		validateReport(t, r.stdout)
		env := r.envelope(t)
		if _, isErr := env["error"]; isErr {
			continue
		}
		if env["command"] != st.args[0] || env["exitStatus"] != float64(st.code) {
			t.Errorf("%v: envelope says command %v exit %v", st.args, env["command"], env["exitStatus"])
		}
	}
	// The same keys for the same meaning: migrate's and status's items
	// name the session by path and its format by sourceFormat.
	m := pisess(t, "migrate", "-n", "--json", root).envelope(t)
	s := pisess(t, "status", "--json", root).envelope(t)
	for _, env := range []map[string]any{m, s} {
		items := env["items"].([]any)
		if len(items) != 2 || items[0].(map[string]any)["path"] == nil || items[0].(map[string]any)["sourceFormat"] == nil {
			t.Errorf("%v items: %v", env["command"], items)
		}
	}
}
