package commands

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"pisess/fixtures"
)

// publishedSchema is one of the JSON Schemas this package publishes,
// compiled once.
type publishedSchema struct {
	file   string
	once   sync.Once
	schema *jsonschema.Schema
	err    error
}

var (
	reportSchema   = &publishedSchema{file: "report.v1.schema.json"}
	progressSchema = &publishedSchema{file: "progress.v1.schema.json"}
)

func (p *publishedSchema) compiled(tb testing.TB) *jsonschema.Schema {
	tb.Helper()
	p.once.Do(func() {
		f, err := os.Open(p.file)
		if err != nil {
			p.err = err
			return
		}
		defer f.Close()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			p.err = err
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource(p.file, doc); err != nil {
			p.err = err
			return
		}
		p.schema, p.err = c.Compile(p.file)
	})
	if p.err != nil {
		tb.Fatalf("%s: %v", p.file, p.err)
	}
	return p.schema
}

// validateReport checks one --json document against the published schema
// (report.v1.schema.json).
func validateReport(tb testing.TB, stdout string) {
	tb.Helper()
	schema := reportSchema.compiled(tb)
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(stdout))
	if err != nil {
		tb.Fatalf("--json output is not JSON: %v\n%s", err, stdout)
	}
	if err := schema.Validate(inst); err != nil {
		tb.Fatalf("--json output does not follow %s: %v\n%s", ReportSchema, err, stdout)
	}
}

// validateProgress checks a --json-progress stream (the lines of stderr
// that are progress objects; logs may share stderr) against the published
// schema (progress.v1.schema.json) and the rules a schema cannot say: a
// plan first when the run got that far, a summary last and only last,
// done never past total nor bytesDone past bytesTotal, and, in the
// summary of a run that ended, every planned byte done.
func validateProgress(tb testing.TB, stderr string) []map[string]any {
	tb.Helper()
	schema := progressSchema.compiled(tb)
	var lines []map[string]any
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(l, `{"schema":"`+ProgressSchema+`"`) {
			continue
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(l))
		if err != nil {
			tb.Fatalf("progress line is not JSON: %v\n%s", err, l)
		}
		if err := schema.Validate(inst); err != nil {
			tb.Fatalf("progress line does not follow %s: %v\n%s", ProgressSchema, err, l)
		}
		m := inst.(map[string]any)
		lines = append(lines, m)
		num := func(k string) int64 { n, _ := m[k].(json.Number).Int64(); return n }
		if num("done") > num("total") || num("bytesDone") > num("bytesTotal") {
			tb.Errorf("progress past its total: %s", l)
		}
	}
	if len(lines) == 0 {
		tb.Fatalf("no %s line on stderr:\n%s", ProgressSchema, stderr)
	}
	for i, m := range lines {
		if last := i == len(lines)-1; last != (m["message_type"] == progressSummary) {
			tb.Errorf("line %d of %d is a %v: a summary comes last, once", i+1, len(lines), m["message_type"])
		}
	}
	if len(lines) > 1 && lines[0]["message_type"] != progressPlan {
		tb.Errorf("the first progress line is a %v, not the plan", lines[0]["message_type"])
	}
	sum := lines[len(lines)-1]
	if sum["error"] == nil && len(lines) > 1 && (sum["done"].(json.Number) != sum["total"].(json.Number) || sum["bytesDone"].(json.Number) != sum["bytesTotal"].(json.Number)) {
		tb.Errorf("the summary of a finished run has not done all: %v", sum)
	}
	return lines
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
		{[]string{"version"}, ExitClean},
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

// TestItemsAndTotalsAsDocumented (docs/json.md's table): inspect's item
// is the store with its problems as findings and its totals every count
// measured; runs's items are runs with members of their own
// (correlationId, command, startedAt, finishedAt, rolledBack), never a
// correlation id in class; prune's name the run they pruned the same way.
func TestItemsAndTotalsAsDocumented(t *testing.T) {
	store := buildStore(t)
	env := pisess(t, "inspect", "--json", store).envelope(t)
	items := env["items"].([]any)
	totals := env["totals"].(map[string]any)
	if len(items) != 1 || items[0].(map[string]any)["path"] != store || items[0].(map[string]any)["class"] != "store" {
		t.Errorf("inspect items: %v", items)
	}
	for k, want := range map[string]float64{"problems": 0, "entries": 11, "segments": 1} {
		if totals[k] != want {
			t.Errorf("inspect totals[%s] = %v, want %v (%v)", k, totals[k], want, totals)
		}
	}
	if b, ok := totals["bytes"].(float64); !ok || b == 0 {
		t.Errorf("inspect totals bytes: %v", totals)
	}
	fixtures.Truncate(t, filepath.Join(store, "segments", "0000000000000001.seg"), 100)
	r := pisess(t, "inspect", "--json", store)
	env = r.envelope(t)
	item := env["items"].([]any)[0].(map[string]any)
	if r.code != ExitProblems || len(item["findings"].([]any)) == 0 || env["totals"].(map[string]any)["problems"] == float64(0) {
		t.Errorf("damaged inspect: %s", r)
	}

	root, _ := placeSession(t, exampleSession, "s.jsonl")
	t.Setenv(EnvClock, fixedClock)
	for _, args := range [][]string{
		{"migrate", "--correlation-id", "items-run-0001", root},
		{"migrate", "--force", "--correlation-id", "items-run-0002", root},
		{"rollback", "--tree", root, "items-run-0002"},
	} {
		if r := pisess(t, args...); r.code != ExitClean {
			t.Fatalf("%v: %s", args, r)
		}
	}
	env = pisess(t, "runs", "--json", root).envelope(t)
	runs := env["items"].([]any)
	if len(runs) != 2 || env["totals"].(map[string]any)["runs"] != float64(2) || env["totals"].(map[string]any)["rolledBack"] != float64(1) {
		t.Fatalf("runs: %v %v", runs, env["totals"])
	}
	if it := runs[0].(map[string]any); it["command"] != "migrate" {
		t.Errorf("runs item 0 is not a migrate: %v", it)
	}
	for i, want := range []struct {
		cid        string
		rolledBack bool
	}{{"items-run-0001", false}, {"items-run-0002", true}} {
		it := runs[i].(map[string]any)
		if it["correlationId"] != want.cid || it["command"] == nil || it["rolledBack"] != want.rolledBack || it["path"] != root ||
			it["startedAt"] == nil || it["finishedAt"] == nil || it["class"] != nil || it["outcome"] != nil {
			t.Errorf("runs item %d: %v", i, it)
		}
	}
	t.Setenv(EnvClock, "2026-06-01T00:00:00.000Z")
	env = pisess(t, "prune", "--json", "--dry-run", "--keep-within", "1d", root).envelope(t)
	pruned := env["items"].([]any)
	if len(pruned) != 2 || pruned[0].(map[string]any)["correlationId"] != "items-run-0001" || pruned[0].(map[string]any)["class"] != nil ||
		pruned[0].(map[string]any)["outcome"] != "would-prune" {
		t.Errorf("prune items: %v", pruned)
	}
}
