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
	if r.code != ExitClean || !strings.Contains(r.stderr, "upgraded "+v1) ||
		!strings.Contains(r.stderr, "pisess rollback --tree "+tree+" cli-upgrade-01") {
		t.Fatalf("upgrade: %s", r)
	}
	r = pisess(t, "upgrade", "--json", v1)
	files, _ := r.jsonObject(t)["files"].([]any)
	if r.code != ExitClean || len(files) != 1 || files[0].(map[string]any)["status"] != "already_v3" {
		t.Fatalf("second upgrade: %s", r)
	}

	writeSession(t, tree, "broken.jsonl", `{"type":"session","id":"s"}`+"\n{\n")
	r = pisess(t, "upgrade", tree)
	if r.code != ExitProblems || !strings.Contains(r.stderr, "line 2: malformed_json") {
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
