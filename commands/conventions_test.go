package commands

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestConventions(t *testing.T) {
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	for _, args := range [][]string{{"--version"}, {"version"}} {
		if r := pisess(t, args...); r.code != ExitClean || !strings.HasPrefix(r.stdout, "pisess ") || !strings.Contains(r.stdout, "go1.") {
			t.Errorf("%v: %s", args, r)
		}
	}
	for shell, want := range map[string]string{"bash": "complete -o filenames -F _pisess_complete pisess", "zsh": "#compdef pisess", "fish": "complete -c pisess"} {
		if r := pisess(t, "completion", shell); r.code != ExitClean || !strings.Contains(r.stdout, want) {
			t.Errorf("completion %s: %s", shell, r)
		}
	}
	if r := pisess(t, "completion", "tcsh"); r.code != ExitUsage {
		t.Errorf("completion tcsh: %s", r)
	}
	// In a child: urfave/cli's help command is a package-level value that
	// its help action makes its own subcommand, so after `pisess help X`
	// in the same process its man generator would recurse forever (one
	// pisess process runs one command, so this is a test artefact).
	man := exec.Command(os.Args[0], "man")
	man.Env = append(os.Environ(), envTestMain+"=1")
	if out, err := man.Output(); err != nil || !strings.Contains(string(out), ".TH pisess 1") || !strings.Contains(string(out), "rollback") {
		t.Errorf("man: %v, %d bytes", err, len(out))
	}
	// The scripts ask pisess for the words (urfave/cli reads os.Args for
	// them: a child process, as the shell runs it).
	cmd := exec.Command(os.Args[0], "--generate-bash-completion")
	cmd.Env = append(os.Environ(), envTestMain+"=1")
	if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "migrate\nrollback\n") {
		t.Errorf("completion words: %q %v", out, err)
	}
	if r := pisess(t, "migrat", root); r.code != ExitUsage || !strings.Contains(r.stderr, `did you mean "migrate"`) {
		t.Errorf("did you mean: %s", r)
	}
	// Short flags: -n is --dry-run (nothing written), -j is --jobs.
	if r := pisess(t, "migrate", "-n", "-j", "2", root); r.code != ExitClean {
		t.Fatalf("migrate -n -j 2: %s", r)
	}
	if _, err := os.Lstat(filepath.Join(root, ".pisess")); err == nil {
		t.Error("-n wrote in the tree: it is not --dry-run")
	}
	// Environment defaults, shown in --help and read.
	if r := pisess(t, "migrate", "--help"); !strings.Contains(r.stdout, "$PISESS_JOBS") {
		t.Errorf("migrate --help does not show $PISESS_JOBS:\n%s", r.stdout)
	}
	t.Setenv("PISESS_JOBS", "many")
	if r := pisess(t, "migrate", "-n", root); r.code != ExitUsage {
		t.Errorf("PISESS_JOBS=many was not read: %s", r)
	}
	t.Setenv("PISESS_JOBS", "")
	log := filepath.Join(t.TempDir(), "env.log")
	t.Setenv("PISESS_LOG_FILE", log)
	t.Setenv("PISESS_LOG_FORMAT", "json")
	if r := pisess(t, "status", root); r.code != ExitClean {
		t.Fatalf("status: %s", r)
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), `"command":"status"`) {
		t.Errorf("PISESS_LOG_FILE got %q", b)
	}
}
