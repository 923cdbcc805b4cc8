package commands

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeSession(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, "--x--", name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const cliV1 = `{"type":"session","id":"s1","timestamp":"2025-06-01T00:00:00.000Z","cwd":"/x"}
{"type":"message","timestamp":"2025-06-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}
`

func TestUpgradeCommand(t *testing.T) {
	tree := t.TempDir()
	v1 := writeSession(t, tree, "v1.jsonl", cliV1)

	r := pisess(t, "upgrade", "--dry-run", "--json", tree)
	obj := r.jsonObject(t)
	if r.code != ExitClean || obj["dryRun"] != true {
		t.Fatalf("dry run: %s", r)
	}
	if got, _ := os.ReadFile(v1); string(got) != cliV1 {
		t.Fatalf("the dry run changed the file")
	}
	if _, err := os.Stat(filepath.Join(tree, ".pisess")); !os.IsNotExist(err) {
		t.Fatalf("the dry run created .pisess")
	}

	r = pisess(t, "upgrade", "--correlation-id", "cli-upgrade-01", tree)
	if r.code != ExitClean || !strings.Contains(r.stdout, "upgraded ") ||
		!strings.Contains(r.stdout, "pisess rollback --tree "+tree+" cli-upgrade-01") {
		t.Fatalf("upgrade: %s", r)
	}
	r = pisess(t, "upgrade", "--json", v1)
	files, _ := r.jsonObject(t)["files"].([]any)
	if r.code != ExitClean || len(files) != 1 || files[0].(map[string]any)["status"] != "already_v3" {
		t.Fatalf("second upgrade: %s", r)
	}

	writeSession(t, tree, "broken.jsonl", `{"type":"session","id":"s"}`+"\n{\n")
	r = pisess(t, "upgrade", tree)
	if r.code != ExitProblems || !strings.Contains(r.stdout, "line 2: malformed_json") {
		t.Fatalf("refused file: %s", r)
	}
}

func TestUpgradeCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"upgrade"},
		{"upgrade", "--correlation-id", "no", t.TempDir()},
		{"upgrade", "--lock-timeout", "soon", t.TempDir()},
	} {
		if r := pisess(t, args...); r.code != ExitUsage {
			t.Errorf("%v: %s", args, r)
		}
	}
	if r := pisess(t, "upgrade", "--help"); r.code != ExitClean || !strings.Contains(r.stdout, "EXIT STATUS") {
		t.Errorf("help: %s", r)
	}
}

// TestUpgradeFollowsPisVersionRule: the header version is pi's (the last
// "version" member; above 3 is current), a file pi never rewrites gets no
// lock, no .pisess and exit 0, and migrate's refusal names the reference's
// true reason instead of advising an upgrade that does nothing.
func TestUpgradeFollowsPisVersionRule(t *testing.T) {
	entry := `{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}` + "\n"
	for _, c := range []struct{ name, header, status, reason string }{
		{"version 1 then 3", `{"type":"session","version":1,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w","version":3}`, "already_v3", "duplicate field `version`"},
		{"version 4", `{"type":"session","version":4,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}`, "skipped", "version must be 3, got 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			file := filepath.Join(root, "--p--", "s.jsonl")
			if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(c.header+"\n"+entry), 0o600); err != nil {
				t.Fatal(err)
			}
			r := pisess(t, "upgrade", "--json", root)
			if r.code != 0 {
				t.Fatalf("upgrade: %s", r)
			}
			files := r.jsonObject(t)["files"].([]any)
			if got := files[0].(map[string]any)["status"]; got != c.status {
				t.Errorf("status %v, want %s", got, c.status)
			}
			if _, err := os.Lstat(filepath.Join(root, ".pisess")); err == nil {
				t.Error("upgrade created .pisess for a file it does not rewrite")
			}
			if _, err := os.Lstat(file + ".lock"); err == nil {
				t.Error("upgrade created a session lock for a file it does not rewrite")
			}
			m := pisess(t, "migrate", "--dry-run", "--json", root)
			out := m.stdout
			if !strings.Contains(out, c.reason) || strings.Contains(out, "does the same now") {
				t.Errorf("migrate's refusal does not name the true reason (%s) or still advises an upgrade:\n%s", c.reason, out)
			}
		})
	}
}

// TestUpgradeJSONSkippedEntryKeys: skippedEntries use the report's lower
// camel case keys.
func TestUpgradeJSONSkippedEntryKeys(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "notes.jsonl"), []byte("{\"not\":\"a session\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := pisess(t, "upgrade", "--json", root)
	skipped, ok := r.jsonObject(t)["skippedEntries"].([]any)
	if !ok || len(skipped) == 0 {
		t.Fatalf("no skippedEntries: %s", r)
	}
	for _, k := range []string{"path", "kind", "reason"} {
		if _, ok := skipped[0].(map[string]any)[k]; !ok {
			t.Errorf("skippedEntries lacks %q: %v", k, skipped[0])
		}
	}
}

// TestRollbackWithoutJournal: an unknown id is exit 4 whether or not the
// tree has a journal, and a tree without one is left without .pisess/.
func TestRollbackWithoutJournal(t *testing.T) {
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	r := pisess(t, "rollback", "--tree", root, "unknown-run-0001")
	if r.code != 4 {
		t.Fatalf("rollback of an unknown id without a journal: %s", r)
	}
	if _, err := os.Lstat(filepath.Join(root, ".pisess")); err == nil {
		t.Error("rollback created .pisess in a tree pisess never changed")
	}
}
