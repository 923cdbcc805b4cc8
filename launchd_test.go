package main

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
)

// launchdAgent is what a test reads of a launchd property list: its top
// dictionary's keys, the strings of ProgramArguments, and Label.
type launchdAgent struct {
	keys  map[string]bool
	label string
	args  []string
}

// readLaunchdAgent parses the plist at path: a <dict> of <key>s, each
// followed by its value.
func readLaunchdAgent(t *testing.T, path string) launchdAgent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := launchdAgent{keys: map[string]bool{}}
	d := xml.NewDecoder(f)
	var key string     // the last top-level key read
	var elems []string // element names from the root
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			elems = append(elems, tok.Name.Local)
			text.Reset()
		case xml.CharData:
			text.Write(tok)
		case xml.EndElement:
			at := strings.Join(elems, "/")
			elems = elems[:len(elems)-1]
			switch {
			case at == "plist/dict/key":
				key = text.String()
				a.keys[key] = true
			case at == "plist/dict/string" && key == "Label":
				a.label = text.String()
			case at == "plist/dict/array/string" && key == "ProgramArguments":
				a.args = append(a.args, text.String())
			}
		}
	}
	return a
}

// TestLaunchdAgents: the launchd agents of dist/launchd, installed as
// their README says (home directory and binary written in), run their
// command lines the way launchd runs an agent (working directory /,
// launchd's PATH, HOME set, nothing else of pisess's environment) over a
// default tree ~/.pi/agent/sessions: each exits 0 and prints nothing
// (StandardOutPath stays empty when all is well), the migration installs
// the sidecars, and the JSON log gets its records.
func TestLaunchdAgents(t *testing.T) {
	bin := fixtures.BuildBinary(t)
	home := t.TempDir()
	tree := filepath.Join(home, ".pi", "agent", "sessions")
	fixtures.CopyTree(t, filepath.Join(fixtures.RepoRoot(t), "fixtures", "example", "sessions"), tree)
	if err := os.MkdirAll(filepath.Join(home, "Library", "Logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(fixtures.RepoRoot(t), "dist", "launchd")
	names, err := filepath.Glob(filepath.Join(dir, "*.plist"))
	if err != nil || len(names) < 2 {
		t.Fatalf("agents in %s: %v %v", dir, names, err)
	}
	// migrate first, twice (the second run finds everything fresh), then
	// the rest.
	agents := []string{filepath.Join(dir, "local.pisess.migrate.plist"), filepath.Join(dir, "local.pisess.migrate.plist")}
	for _, n := range names {
		if !strings.HasSuffix(n, "migrate.plist") {
			agents = append(agents, n)
		}
	}
	for _, path := range agents {
		a := readLaunchdAgent(t, path)
		if want := strings.TrimSuffix(filepath.Base(path), ".plist"); a.label != want {
			t.Errorf("%s: Label %q, want %q (launchctl names it by its label)", path, a.label, want)
		}
		if !a.keys["StartInterval"] && !a.keys["StartCalendarInterval"] {
			t.Errorf("%s: no schedule", path)
		}
		for _, k := range []string{"StandardOutPath", "StandardErrorPath"} {
			if !a.keys[k] {
				t.Errorf("%s: no %s: what needs the user would be lost", path, k)
			}
		}
		if len(a.args) < 2 || a.args[0] != "/usr/local/bin/pisess" {
			t.Fatalf("%s: ProgramArguments %q, want /usr/local/bin/pisess and a command", path, a.args)
		}
		args := make([]string, len(a.args)-1)
		for i, s := range a.args[1:] {
			args[i] = strings.ReplaceAll(s, "/Users/YOU", home)
		}
		cmd := exec.Command(bin, args...)
		cmd.Dir = "/"
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin:/usr/sbin:/sbin", "USER=" + os.Getenv("USER")}
		out, err := cmd.CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Fatalf("%s: pisess %s: %v, printed %q", filepath.Base(path), strings.Join(args, " "), err, out)
		}
	}
	sidecars, _ := filepath.Glob(filepath.Join(tree, "*", "*.v2"))
	if len(sidecars) == 0 {
		t.Fatal("the migrate agent installed no sidecar in the default tree")
	}
	b, err := os.ReadFile(filepath.Join(home, "Library", "Logs", "pisess.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) < len(agents) {
		t.Fatalf("%d log records for %d runs", len(lines), len(agents))
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("log record not JSON: %q", l)
		}
	}
}
