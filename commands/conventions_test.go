package commands

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pisess/commands/engine"
	"pisess/commands/metrics"
	"pisess/fixtures"
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

// TestShortOptionBundles: one-letter flags bundle as getopt bundles them
// (-nq is -n -q), and one that takes a value takes the rest of the word
// (-j2 is -j 2), or the next word (-nj 2).
func TestShortOptionBundles(t *testing.T) {
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	for _, args := range [][]string{
		{"migrate", "-nq", root},
		{"migrate", root, "-qn"},
		{"-q", "migrate", "-nj2", root},
		{"migrate", "-nqj", "2", root},
		{"migrate", "-j2", "-nq", root},
	} {
		r := pisess(t, args...)
		// -q: nothing to say on a clean run; -n: nothing written.
		if r.code != ExitClean || r.stdout != "" || r.stderr != "" {
			t.Errorf("%v: %s", args, r)
		}
		if _, err := os.Lstat(filepath.Join(root, ".pisess")); err == nil {
			t.Fatalf("%v wrote in the tree: -n was not read", args)
		}
	}
	// The value is the rest of the word: -j-1 is --jobs -1, refused.
	if r := pisess(t, "migrate", "-nj-1", root); r.code != ExitUsage || !strings.Contains(r.stderr, "--jobs -1") {
		t.Errorf("-nj-1: %s", r)
	}
	// Without -q the dry run prints its plan: the bundle's -q was read.
	if r := pisess(t, "migrate", "-nj2", root); r.code != ExitClean || !strings.Contains(r.stdout, "would migrate") {
		t.Errorf("-nj2: %s", r)
	}
}

// TestUnknownFlagDidYouMean: a mistyped flag gets the closest flag the
// command takes, dashes ignored.
func TestUnknownFlagDidYouMean(t *testing.T) {
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "-dryrun", root}, "did you mean --dry-run?"},
		{[]string{"migrate", "--dryrun", root}, "did you mean --dry-run?"},
		{[]string{"fsck", "--repiar", root}, "did you mean --repair?"},
		{[]string{"status", "--jsn", root}, "did you mean --json?"},
		{[]string{"status", "--log-levle", "info", root}, "did you mean --log-level?"},
	} {
		r := pisess(t, tt.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%v: want %q: %s", tt.args, tt.want, r)
		}
	}
	if r := pisess(t, "migrate", "--frobnicate", root); r.code != ExitUsage || strings.Contains(r.stderr, "did you mean") {
		t.Errorf("--frobnicate: no flag is close, none should be offered: %s", r)
	}
}

// TestEnvironmentValueErrorsNameTheVariable: a bad value from the
// environment is blamed on the variable, one from the command line on the
// flag.
func TestEnvironmentValueErrorsNameTheVariable(t *testing.T) {
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	for _, tt := range []struct {
		env, value string
		args       []string
	}{
		{"PISESS_LOG_LEVEL", "loud", []string{"status", root}},
		{"PISESS_LOG_FORMAT", "xml", []string{"status", root}},
		{"PISESS_LOG_FILE", filepath.Join(root, "no", "such", "dir", "log"), []string{"status", root}},
		{"PISESS_JOBS", "-1", []string{"migrate", "-n", root}},
		{"PISESS_JOBS", "-1", []string{"fsck", root}},
		{"PISESS_JOBS", "many", []string{"fsck", root}},
		{"PISESS_LOCK_WAIT", "-1s", []string{"migrate", "-n", root}},
		{"PISESS_LOCK_TIMEOUT", "-1s", []string{"migrate", "-n", root}},
		{"PISESS_QUIET", "maybe", []string{"status", root}},
		{"PISESS_STRICT", "maybe", []string{"migrate", "-n", root}},
	} {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.env, tt.value)
			r := pisess(t, tt.args...)
			if r.code == ExitClean || !strings.Contains(r.stderr, tt.env) {
				t.Fatalf("the error does not name %s: %s", tt.env, r)
			}
			flag := "--" + strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(tt.env, "PISESS_")), "_", "-")
			if strings.Contains(r.stderr, flag+" ") && !strings.Contains(r.stderr, "environment's "+flag) {
				t.Errorf("the error blames %s, which was not given: %s", flag, r)
			}
		})
	}
	// The same values on the command line are blamed on the flag.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-level", "loud", "status", root}, `pisess: --log-level "loud": want trace, debug`},
		{[]string{"fsck", "--jobs", "-1", root}, "pisess: --jobs -1: below the minimum of 0"},
		{[]string{"migrate", "-n", "--lock-wait", "-1s", root}, "pisess: --lock-wait -1s: below the minimum of 0s"},
	} {
		if r := pisess(t, tt.args...); r.code != ExitUsage || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%v: want %q: %s", tt.args, tt.want, r)
		}
	}
}

// TestVersionJSON: version --json is one report document, exit 0.
func TestVersionJSON(t *testing.T) {
	r := pisess(t, "version", "--json")
	if r.code != ExitClean {
		t.Fatalf("version --json: %s", r)
	}
	env := r.envelope(t)
	d, _ := env["detail"].(map[string]any)
	if env["command"] != "version" || d == nil || !strings.HasPrefix(d["goVersion"].(string), "go1.") || d["version"] == "" {
		t.Errorf("version --json: %v", env)
	}
}

// TestKeepWithinUnits: restic's units (and weeks), months and years of
// fixed length; Go's minutes and seconds are refused, so "2m" cannot mean
// two minutes to someone and two months to pisess.
func TestKeepWithinUnits(t *testing.T) {
	day := 24 * time.Hour
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"30d", 30 * day}, {"2w", 14 * day}, {"1y2m", 365*day + 60*day}, {"720h", 720 * time.Hour},
		{"1y", 365 * day}, {"1m", 30 * day}, {"1d12h", 36 * time.Hour}, {"0d1h", time.Hour},
	} {
		if got, err := parseRetention(tt.in); err != nil || got != tt.want {
			t.Errorf("%q: %v %v, want %v", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "0d", "30", "d", "5s", "1h30s", "2.5d", "-1d", "30D", "1d 2h", "99999999999999y"} {
		if got, err := parseRetention(in); err == nil {
			t.Errorf("%q: %v, want an error", in, got)
		}
	}
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	if r := pisess(t, "prune", "--keep-within", "30d", root); r.code != ExitClean {
		t.Errorf("prune --keep-within 30d: %s", r)
	}
	if r := pisess(t, "prune", "--keep-within", "5s", root); r.code != ExitUsage || !strings.Contains(r.stderr, "30d, 2w, 1y2m") {
		t.Errorf("prune --keep-within 5s: %s", r)
	}
}

// TestRunPruneWantsAWindow: runPrune itself refuses a window that is not
// positive, as a usage error, before it touches a tree (the command line
// refuses it earlier; this guards every other caller).
func TestRunPruneWantsAWindow(t *testing.T) {
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	before := fixtures.TreeDigest(t, root)
	for _, keep := range []time.Duration{0, -time.Hour} {
		var u *engine.UsageError
		if _, err := runPrune(context.Background(), pruneOptions{Paths: []string{root}, KeepWithin: keep}); !errors.As(err, &u) {
			t.Errorf("prune with --keep-within %v ran: %v", keep, err)
		}
	}
	if after := fixtures.TreeDigest(t, root); !maps.Equal(before, after) {
		t.Error("a refused prune changed the tree")
	}
}

// TestPruneTextHumanSizes: prune's report gives the size freed in human
// units, as every other report.
func TestPruneTextHumanSizes(t *testing.T) {
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	t.Setenv(EnvClock, fixedClock)
	if r := pisess(t, "migrate", "--correlation-id", "prune-size-0001", root); r.code != ExitClean {
		t.Fatalf("migrate: %s", r)
	}
	if r := pisess(t, "rollback", "--tree", root, "prune-size-0001"); r.code != ExitClean {
		t.Fatalf("rollback: %s", r)
	}
	t.Setenv(EnvClock, "2026-03-01T00:00:00.000Z")
	r := pisess(t, "prune", "--dry-run", "--keep-within", "1w", root)
	if r.code != ExitClean || !strings.Contains(r.stdout, "would remove 1 run(s)") || !strings.Contains(r.stdout, " KiB;") || strings.Contains(r.stdout, " bytes") {
		t.Errorf("prune text: %s", r)
	}
}

// TestManPage: the roff page has the sections a man page has — EXIT
// STATUS, ENVIRONMENT, FILES — every line of text is safe from roff (no
// line begins with a request character, hyphens and backslashes are
// escaped, input is ASCII), and angle-bracketed names are written as they
// are: "<stem>.v2/" is not taken for markup.
func TestManPage(t *testing.T) {
	r := pisess(t, "man")
	if r.code != ExitClean {
		t.Fatalf("man: %s", r)
	}
	page := r.stdout
	for _, want := range []string{".TH PISESS 1", `.SH "EXIT STATUS"`, `.SH "ENVIRONMENT"`, `.SH "FILES"`, `.SS "pisess rollback`,
		`.SH "CONVENTIONS"`, `.SH "LOGS AND METRICS"`, `.SH "SEVERAL USERS' TREES"`, `.SH "SECURITY"`,
		`sidecars (<stem>.v2/ beside each session file)`, `\fI<tree>/.pisess/journal.jsonl\fR`, `\fB\-\-dry\-run\fR, \fB\-n\fR`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	requests := map[string]bool{".TH": true, ".SH": true, ".SS": true, ".PP": true, ".TP": true, ".RS": true, ".RE": true, ".nf": true, ".fi": true, ".nh": true, ".ad": true, ".B": true}
	for i, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			if req, _, _ := strings.Cut(l, " "); !requests[req] {
				t.Errorf("line %d is an unknown request: %q", i+1, l)
			}
			continue
		}
		for _, r := range l {
			if r >= 0x80 {
				t.Errorf("line %d is not ASCII: %q", i+1, l)
				break
			}
		}
		if strings.Contains(strings.ReplaceAll(l, `\-`, ""), "-") {
			t.Errorf("line %d has an unescaped hyphen: %q", i+1, l)
		}
	}
}

// TestManPageRendered renders the page as man(1) does (groff -man), when
// groff is installed (a system tool, not something the repository
// provides): groff warns about nothing, and the text a reader sees has
// every section, variable and file, with "<stem>.v2/" whole.
func TestManPageRendered(t *testing.T) {
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("groff is not installed (apt-get install groff-base)")
	}
	r := pisess(t, "man")
	if r.code != ExitClean {
		t.Fatalf("man: %s", r)
	}
	page := r.stdout
	file := filepath.Join(t.TempDir(), "pisess.1")
	if err := os.WriteFile(file, []byte(page), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("groff", "-man", "-Tutf8", "-ww", "-rLL=100n", file)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("groff: %v\n%s", err, stderr.String())
	}
	text := plainText(string(out))
	for _, want := range []string{
		"(<stem>.v2/ beside each session file)",
		"<tree>/.pisess/journal.jsonl",
		"<tree>/.pisess/quarantine/<correlation id>/",
		"pisess migrate [options] [PATH...]",
		"--dry-run, -n",
		"[$PISESS_JOBS]",
		"pisess rollback [--dry-run] [--json] --to-checkpoint N STORE",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
	sections := map[string]string{}
	var name string
	for _, l := range strings.Split(text, "\n") {
		if l != "" && l[0] != ' ' {
			name = strings.TrimSpace(l)
			continue
		}
		sections[name] += l + "\n"
	}
	for _, e := range exitStatuses {
		if !strings.Contains(sections["EXIT STATUS"], " "+itoa(e.code)+" ") {
			t.Errorf("EXIT STATUS lacks %d:\n%s", e.code, sections["EXIT STATUS"])
		}
	}
	vars := []string{}
	for _, e := range environment {
		vars = append(vars, e.name)
	}
	for _, env := range envFlags {
		vars = append(vars, env)
	}
	for _, v := range vars {
		if !strings.Contains(sections["ENVIRONMENT"], v) {
			t.Errorf("ENVIRONMENT lacks %s", v)
		}
	}
	for _, f := range []string{"journal.jsonl", "/lock", "quarantine/", "refused.json", "refresh.json", "fresh.json", "pruning/", "<stem>.v2.staging.<uuid>/"} {
		if !strings.Contains(sections["FILES"], f) {
			t.Errorf("FILES lacks %s", f)
		}
	}
	// The sections the README's reference parts became (issue 33): each
	// metric the metrics file holds, and the security model's promises.
	flat := func(name string) string { return strings.Join(strings.Fields(sections[name]), " ") }
	for _, f := range metrics.Families() {
		if !strings.Contains(flat("LOGS AND METRICS"), f.Name+" {"+strings.Join(f.Labels, ", ")+"}") {
			t.Errorf("LOGS AND METRICS lacks %s with its labels", f.Name)
		}
	}
	for _, want := range []string{"data, never as an address", "No symlink is ever followed", "never falls back to working as root",
		"refused as forged or corrupt", "more than one hard link", ".pisess itself must be a real directory", "nothing in them is an address"} {
		if !strings.Contains(flat("SECURITY"), want) {
			t.Errorf("SECURITY lacks %q", want)
		}
	}
	for _, want := range []string{"Flags may come anywhere", "usage error (16)", "SIGTERM stops a run between steps"} {
		if !strings.Contains(flat("CONVENTIONS"), want) {
			t.Errorf("CONVENTIONS lacks %q", want)
		}
	}
	if !strings.Contains(flat("SEVERAL USERS' TREES"), "--all-users") || !strings.Contains(flat("EXIT STATUS"), "A problem is") {
		t.Errorf("SEVERAL USERS' TREES or EXIT STATUS lacks its text:\n%s\n%s", sections["SEVERAL USERS' TREES"], sections["EXIT STATUS"])
	}
}

// plainText drops groff's overstrike (bold, underline) from its -Tutf8
// output, and the hyphens it would not break at.
func plainText(s string) string {
	var b []rune
	for _, r := range s {
		if r == '\b' && len(b) > 0 {
			b = b[:len(b)-1]
			continue
		}
		b = append(b, r)
	}
	return strings.ReplaceAll(string(b), "\u2010", "-")
}

// TestReadmeEnvironmentTable: the README's Environment table lists every
// variable pisess reads, and no other (the definitions are the source).
func TestReadmeEnvironmentTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(b), "\n## Environment\n")
	sec, _, _ = strings.Cut(sec, "\n## ")
	in := map[string]bool{}
	for _, l := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		cell := strings.Split(l, "|")[1]
		for _, part := range strings.Split(cell, ",") {
			in[strings.Trim(strings.TrimSpace(part), "`")] = true
		}
	}
	want := map[string]bool{}
	for _, e := range environment {
		want[e.name] = true
	}
	for _, env := range envFlags {
		want[env] = true
	}
	for v := range want {
		if !in[v] {
			t.Errorf("README's Environment table lacks %s", v)
		}
	}
	for v := range in {
		if !want[v] {
			t.Errorf("README's Environment table lists %s, which the definitions do not", v)
		}
	}
}

// TestReadmeCommandTable: the README's table of commands has one row per
// command of the app (help aside), and each row's exit statuses are those
// the command's own help lists (its definition is the source).
func TestReadmeCommandTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(b), "\n## Commands\n")
	sec, _, _ = strings.Cut(sec, "\n## ")
	rows := map[string]string{}
	for _, l := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(l, "| `pisess ") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		name := strings.Fields(strings.Trim(cells[0], "`"))[1]
		if _, dup := rows[name]; dup {
			t.Errorf("README's command table lists %s twice", name)
		}
		rows[name] = cells[len(cells)-1]
	}
	app := (&run{}).app()
	for _, c := range app.Commands {
		if c.Hidden || c.Name == "help" {
			continue
		}
		got, ok := rows[c.Name]
		if !ok {
			t.Errorf("README's command table lacks %s", c.Name)
			continue
		}
		delete(rows, c.Name)
		var want []string
		for _, l := range commandExitLines(c) {
			if code, _, _ := strings.Cut(l, " "); strings.Trim(code, "0123456789") == "" {
				want = append(want, code)
			}
		}
		if w := strings.Join(want, ", "); got != w {
			t.Errorf("README's command table gives %s the exit statuses %q; its help lists %q", c.Name, got, w)
		}
	}
	for name := range rows {
		t.Errorf("README's command table lists %s, which the app does not have", name)
	}
}

// TestCompletionWords: what `pisess __complete` answers, the engine of the
// three shells' scripts.
func TestCompletionWords(t *testing.T) {
	for _, tt := range []struct {
		words     []string
		want      []string // each must be offered
		not       []string // none may be
		files     bool
		onlyWants bool // nothing but want
	}{
		{words: []string{""}, want: []string{"migrate", "rollback", "fsck", "help"}, not: []string{"h", "__complete"}},
		{words: []string{"mi"}, want: []string{"migrate"}, onlyWants: true},
		{words: []string{"-q", ""}, want: []string{"migrate", "status"}},
		{words: []string{"--log-file", "x", "st"}, want: []string{"status"}, onlyWants: true},
		{words: []string{"migrate", "--dr"}, want: []string{"--dry-run"}, onlyWants: true},
		{words: []string{"migrate", "-q", "--dr"}, want: []string{"--dry-run"}, onlyWants: true},
		{words: []string{"migrate", "-nq", "--j"}, want: []string{"--json", "--json-progress", "--jobs"}, onlyWants: true},
		{words: []string{"migrate", "--lo"}, want: []string{"--lock-timeout", "--lock-wait", "--log-format", "--log-file", "--log-level"}, onlyWants: true},
		{words: []string{"migrate", ""}, files: true},
		{words: []string{"completion", ""}, want: completionShells, onlyWants: true},
		{words: []string{"completion", "bash", ""}},
		{words: []string{"--log-level", ""}, want: flagValues["log-level"], onlyWants: true},
		{words: []string{"status", "--log-format", "j"}, want: []string{"json"}, onlyWants: true},
		{words: []string{"--log-level=de"}, want: []string{"--log-level=debug"}, onlyWants: true},
		{words: []string{"--log-file", ""}, files: true},
		{words: []string{"rollback", "--tree", ""}, files: true},
		{words: []string{"rollback", "--to-checkpoint", "3", ""}, files: true},
		{words: []string{"migrate", "--jobs", ""}},
		{words: []string{"help", "fs"}, want: []string{"fsck"}, onlyWants: true},
		{words: []string{"migrate", "--", "-"}, files: true},
	} {
		app := (&run{}).app()
		cands, files := complete(app, tt.words)
		var got []string
		for _, c := range cands {
			got = append(got, c.word)
		}
		has := func(w string) bool {
			for _, g := range got {
				if g == w {
					return true
				}
			}
			return false
		}
		for _, w := range tt.want {
			if !has(w) {
				t.Errorf("%q: %q lacks %q", tt.words, got, w)
			}
		}
		for _, w := range tt.not {
			if has(w) {
				t.Errorf("%q: %q offers %q", tt.words, got, w)
			}
		}
		if tt.onlyWants && len(got) != len(tt.want) {
			t.Errorf("%q: %q, want only %q", tt.words, got, tt.want)
		}
		if files != tt.files {
			t.Errorf("%q: files %v, want %v", tt.words, files, tt.files)
		}
	}
}

// completionBin writes shell's completion script into a fresh directory,
// as name, and puts pisess (this test binary, run as pisess) on the PATH
// of env, for the shell to run.
func completionBin(t *testing.T, shell, name string) (dir, script string, env []string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.Symlink(os.Args[0], filepath.Join(dir, "pisess")); err != nil {
		t.Fatal(err)
	}
	script = filepath.Join(dir, name)
	if err := os.WriteFile(script, []byte(completionScripts[shell]), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, script, append(os.Environ(), envTestMain+"=1", "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestBashCompletion sources the bash script in a real bash and drives
// its function as bash's programmable completion does (COMP_WORDS split
// at COMP_WORDBREAKS, COMP_LINE, COMP_POINT).
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is not on PATH")
	}
	dir, script, env := completionBin(t, "bash", "pisess.bash")
	if err := os.WriteFile(filepath.Join(dir, "afile.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		line  string
		words []string // COMP_WORDS as bash splits the line
		want  []string
	}{
		{"pisess migrate --dr", []string{"pisess", "migrate", "--dr"}, []string{"--dry-run"}},
		{"pisess -q mig", []string{"pisess", "-q", "mig"}, []string{"migrate"}},
		{"pisess -q migrate -nq --js", []string{"pisess", "-q", "migrate", "-nq", "--js"}, []string{"--json", "--json-progress"}},
		{"pisess completion ", []string{"pisess", "completion", ""}, []string{"bash", "zsh", "fish"}},
		{"pisess --log-level d", []string{"pisess", "--log-level", "d"}, []string{"debug"}},
		{"pisess --log-level=d", []string{"pisess", "--log-level", "=", "d"}, []string{"debug"}},
		{"pisess --log-level=", []string{"pisess", "--log-level", "="}, []string{"=trace", "=debug", "=info", "=warn", "=error"}},
		{"pisess status af", []string{"pisess", "status", "af"}, []string{"afile.txt"}},
	} {
		t.Run(tt.line, func(t *testing.T) {
			quoted := make([]string, len(tt.words))
			for i, w := range tt.words {
				quoted[i] = "'" + w + "'"
			}
			prog := `set -e
source "$1"
complete -p pisess
cd "$2"
COMP_LINE="$3"; COMP_POINT=${#COMP_LINE}
COMP_WORDS=(` + strings.Join(quoted, " ") + `); COMP_CWORD=$((${#COMP_WORDS[@]}-1))
_pisess_complete
printf '%s\n' "${COMPREPLY[@]}"
`
			cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog, "bash", script, dir, tt.line)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("bash: %v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) == 0 || !strings.HasPrefix(lines[0], "complete -o filenames -F _pisess_complete pisess") {
				t.Fatalf("complete -p: %q", lines)
			}
			got := lines[1:]
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("COMPREPLY %q, want %q", got, tt.want)
			}
		})
	}
}

// TestFishCompletion asks a real fish for completions with the script
// loaded (complete --do-complete), when fish is installed: fish is an
// optional shell, not something the repository provides.
func TestFishCompletion(t *testing.T) {
	fish, err := exec.LookPath("fish")
	if err != nil {
		t.Skip("fish is not installed")
	}
	_, script, env := completionBin(t, "fish", "pisess.fish")
	for _, tt := range []struct {
		line string
		want []string
	}{
		{"pisess migrate --dr", []string{"--dry-run"}},
		{"pisess -q mig", []string{"migrate"}},
		{"pisess completion ", []string{"bash", "zsh", "fish"}},
		{"pisess --log-level=d", []string{"--log-level=debug"}},
		{"pisess --log-format ", []string{"console", "json"}},
	} {
		cmd := exec.Command(fish, "--no-config", "-c", `source $argv[1]; complete --do-complete $argv[2]`, script, tt.line)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: fish: %v\n%s", tt.line, err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			w, _, _ := strings.Cut(l, "\t")
			got = append(got, w)
		}
		// fish sorts what it offers.
		want := slices.Sorted(slices.Values(tt.want))
		if slices.Sort(got); !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", tt.line, got, want)
		}
	}
}

// TestZshCompletion runs the zsh script's function in a real zsh, with
// zsh's completion builtins replaced by ones that print what they get
// (zsh completes only in an interactive line editor), when zsh is
// installed: zsh is an optional shell, not something the repository
// provides.
func TestZshCompletion(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("zsh is not installed")
	}
	_, script, env := completionBin(t, "zsh", "_pisess")
	for _, tt := range []struct {
		words []string
		want  string
	}{
		{[]string{"pisess", "migrate", "--dr"}, "describe --dry-run:plan, build and verify outside the tree; write nothing in it\n"},
		{[]string{"pisess", "completion", ""}, "describe bash zsh fish\n"},
		{[]string{"pisess", "--log-level=w"}, "describe --log-level=warn\n"},
		{[]string{"pisess", "status", ""}, "files\n"},
	} {
		quoted := make([]string, len(tt.words))
		for i, w := range tt.words {
			quoted[i] = "'" + w + "'"
		}
		prog := `compdef() { print "compdef $*" }
_describe() { print -r -- "describe ${(P)4}" }
_files() { print files }
source "$1"
words=(` + strings.Join(quoted, " ") + `); CURRENT=${#words}
_pisess
`
		cmd := exec.Command(zsh, "-f", "-c", prog, "zsh", script)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: zsh: %v\n%s", tt.words, err, out)
		}
		if got := strings.TrimPrefix(string(out), "compdef _pisess pisess\n"); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.words, got, tt.want)
		}
	}
}

// TestCompleteCommandOutput: __complete answers one word a line, its
// description after one tab, placeholders unquoted.
func TestCompleteCommandOutput(t *testing.T) {
	r := pisess(t, completeCommand, "migrate", "--")
	if r.code != ExitClean || r.stdout == "" {
		t.Fatalf("__complete: %s", r)
	}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if !strings.HasPrefix(l, "--") || strings.Count(l, "\t") != 1 || strings.Contains(l, "`") {
			t.Errorf("line %q", l)
		}
	}
}

// TestCompletionRunIDs: rollback's argument completes to the runs its
// trees' journals record, newest first, whichever way --tree is given.
func TestCompletionRunIDs(t *testing.T) {
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	var ids []string
	for range 2 {
		r := pisess(t, "migrate", "--force", "--json", root)
		var env struct {
			CorrelationID string `json:"correlationId"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &env); err != nil || env.CorrelationID == "" {
			t.Fatalf("migrate: %v: %s", err, r)
		}
		ids = append(ids, env.CorrelationID)
	}
	app := (&run{}).app()
	for _, words := range [][]string{
		{"rollback", "--tree", root, ""},
		{"rollback", "--tree=" + root, ""},
		{"--log-level", "warn", "rollback", "--tree", root, ""},
	} {
		cands, files := complete(app, words)
		var got []string
		for _, c := range cands {
			got = append(got, c.word)
		}
		if files || !slices.Equal(got, []string{ids[1], ids[0]}) {
			t.Errorf("%q: got %q (files %v), want the two runs newest first %q", words, got, files, []string{ids[1], ids[0]})
		}
	}
	cands, _ := complete(app, []string{"rollback", "--tree", root, ids[0][:len(ids[0])-1]})
	if len(cands) != 1 || cands[0].word != ids[0] || !strings.Contains(cands[0].help, "migrate") {
		t.Errorf("prefix: %+v", cands)
	}
	// The default tree (PI_SESSIONS_DIR) without --tree.
	t.Setenv("PI_SESSIONS_DIR", root)
	if cands, _ := complete(app, []string{"rollback", ""}); len(cands) != 2 {
		t.Errorf("default tree: %+v", cands)
	}
}
