package commands

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
	"github.com/xrash/smetrics"

	"pisess/commands/engine"
)

// The conventions users bring from other tools (restic, golang-migrate,
// e2fsck): short flags, environment defaults for whatever a crontab sets,
// --version, shell completion, a man page, did-you-mean. They are applied
// here, in one place, to the flags the commands define.

// shortFlags are the one-letter aliases, as the anchors spell them.
var shortFlags = map[string]string{"dry-run": "n", "jobs": "j"}

// envFlags are the flags a cron user sets, readable from the environment
// (the command line wins); --help shows each variable.
var envFlags = map[string]string{
	"log-format":   "PISESS_LOG_FORMAT",
	"log-file":     "PISESS_LOG_FILE",
	"log-level":    "PISESS_LOG_LEVEL",
	"metrics-file": "PISESS_METRICS_FILE",
	"quiet":        "PISESS_QUIET",
	"jobs":         "PISESS_JOBS",
	"lock-timeout": "PISESS_LOCK_TIMEOUT",
	"lock-wait":    "PISESS_LOCK_WAIT",
	"strict":       "PISESS_STRICT",
}

// applyConventions adds the short aliases and environment variables to
// every flag that has one.
func applyConventions(app *cli.App) {
	apply := func(fs []cli.Flag) {
		for _, f := range fs {
			name := f.Names()[0]
			short, env := shortFlags[name], envFlags[name]
			switch f := f.(type) {
			case *cli.BoolFlag:
				f.Aliases, f.EnvVars = addAlias(f.Aliases, short), addEnv(f.EnvVars, env)
			case *cli.IntFlag:
				f.Aliases, f.EnvVars = addAlias(f.Aliases, short), addEnv(f.EnvVars, env)
			case *cli.StringFlag:
				f.Aliases, f.EnvVars = addAlias(f.Aliases, short), addEnv(f.EnvVars, env)
			case *cli.DurationFlag:
				f.Aliases, f.EnvVars = addAlias(f.Aliases, short), addEnv(f.EnvVars, env)
			}
		}
	}
	apply(app.Flags)
	for _, c := range app.Commands {
		apply(c.Flags)
	}
}

func addAlias(as []string, a string) []string {
	if a == "" {
		return as
	}
	for _, x := range as {
		if x == a {
			return as
		}
	}
	return append(as, a)
}

func addEnv(es []string, e string) []string {
	if e == "" || len(es) > 0 {
		return es
	}
	return []string{e}
}

// VersionInfo is what pisess knows of its own build: version --json's
// detail, and the line of --version.
type VersionInfo struct {
	Version   string `json:"version"`            // the module version, "(devel)" for a local build
	Revision  string `json:"revision,omitempty"` // the VCS revision
	Modified  bool   `json:"modified"`           // built from a tree with uncommitted changes
	Time      string `json:"time,omitempty"`     // the revision's commit time
	GoVersion string `json:"goVersion"`
}

// versionInfo reads the build information Go embeds in the binary.
func versionInfo() VersionInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return VersionInfo{Version: "(no build information)", GoVersion: runtime.Version()}
	}
	v := VersionInfo{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		case "vcs.time":
			v.Time = s.Value
		}
	}
	return v
}

// Version is pisess's version: the module version, the VCS revision and
// the Go version it was built with.
func Version() string {
	v := versionInfo()
	rev, dirty, at := v.Revision, "", ""
	if v.Modified {
		dirty = "+dirty"
	}
	if v.Time != "" {
		at = " " + v.Time
	}
	if rev == "" {
		rev = "unknown revision"
	}
	return fmt.Sprintf("pisess %s (%s%s%s) %s", v.Version, rev, dirty, at, v.GoVersion)
}

func versionCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:  "version",
		Usage: "print pisess's version, VCS revision and Go version",
		Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			r.value = versionInfo()
			r.text = func(w io.Writer) { fmt.Fprintln(w, Version()) }
			return nil
		},
	}, exitStatusHelp("0   printed", "16  usage error"))
}

// suggest returns the command closest to a mistyped name, or "".
func suggest(app *cli.App, name string) string {
	type cand struct {
		name  string
		score float64
	}
	var cs []cand
	for _, c := range app.Commands {
		for _, n := range c.Names() {
			cs = append(cs, cand{n, smetrics.JaroWinkler(strings.ToLower(name), n, 0.7, 4)})
		}
	}
	sort.Slice(cs, func(a, b int) bool { return cs[a].score > cs[b].score })
	if len(cs) > 0 && cs[0].score >= 0.8 {
		return cs[0].name
	}
	return ""
}

func init() {
	// urfave/cli gives --version the alias -v, which is --verbose here
	// (as in restic); --version keeps its long name only.
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version, VCS revision and Go version"}
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, Version()) }
}

// flagValues are the words a flag takes, for the flags that take one of a
// few: --help, the man page, completion and the check of a value (from
// the command line or the environment) all read this one list.
var flagValues = map[string][]string{
	"log-format": {LogConsole, LogJSON},
	"log-level":  {"trace", "debug", "info", "warn", "error"},
}

// argValues are the words a command's argument takes, for completion.
var argValues = map[string][]string{
	"completion": completionShells,
}

// completionShells are the shells pisess completion writes a script for.
var completionShells = []string{"bash", "zsh", "fish"}

// orList writes words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// checkFlags checks the value of every flag of fs that has a rule
// (flagValues; numeric flags are checked against their bounds, bounds.go), naming the flag, or the environment variable
// the value came from when the command line did not give it.
func checkFlags(c *cli.Context, argv []string, fs []cli.Flag) error {
	for _, f := range fs {
		name := f.Names()[0]
		want := ""
		if words, ok := flagValues[name]; ok {
			v := c.String(name)
			if !slices.Contains(words, v) {
				want = "want " + orList(words)
			}
		}
		if want != "" {
			return engine.Usagef("%s: %s", flagValueSource(c, argv, f), want)
		}
	}
	return nil
}

// flagValueSource names a flag's value for a message: `--jobs -1` when the
// command line gave it, `PISESS_JOBS="-1" (the environment's --jobs)` when
// the environment did.
func flagValueSource(c *cli.Context, argv []string, f cli.Flag) string {
	name := f.Names()[0]
	value := fmt.Sprint(c.Value(name))
	if _, isString := c.Value(name).(string); isString {
		value = fmt.Sprintf("%q", value)
	}
	if env := flagEnv(argv, f); env != "" {
		return fmt.Sprintf("%s=%q (the environment's --%s)", env, os.Getenv(env), name)
	}
	return "--" + name + " " + value
}

// flagEnv returns the environment variable that gave f its value, or ""
// when the command line gave it or neither did.
func flagEnv(argv []string, f cli.Flag) string {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok || onCommandLine(argv, f) {
		return ""
	}
	for _, e := range df.GetEnvVars() {
		if _, set := os.LookupEnv(e); set {
			return e
		}
	}
	return ""
}

// onCommandLine reports whether argv (normalized: bundles split) gives f.
func onCommandLine(argv []string, f cli.Flag) bool {
	for _, a := range argv[min(1, len(argv)):] {
		if a == "--" {
			return false
		}
		if isFlag(a) && slices.Contains(f.Names(), flagName(a)) {
			return true
		}
	}
	return false
}

// commandFlags returns the flags of the command c runs, then the global
// flags.
func commandFlags(c *cli.Context) []cli.Flag {
	var fs []cli.Flag
	if c.Command != nil {
		fs = append(fs, c.Command.Flags...)
	}
	if c.App != nil {
		fs = append(fs, c.App.Flags...)
	}
	return fs
}

// suggestFlag returns the flag closest to a mistyped name, as --name, or
// "". Dashes are ignored in the comparison (-dryrun is --dry-run).
func suggestFlag(c *cli.Context, name string) string {
	plain := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "")) }
	best, score := "", 0.0
	for _, f := range commandFlags(c) {
		for _, n := range f.Names() {
			if len(n) < 2 {
				continue
			}
			if s := smetrics.JaroWinkler(plain(name), plain(n), 0.7, 4); s > score {
				best, score = n, s
			}
		}
	}
	if score < 0.8 {
		return ""
	}
	return "--" + best
}

// envFlag is an environment variable that gives flags their default.
type envFlag struct {
	env  string
	flag string // "--jobs (migrate, fsck)", "--quiet"
}

// envFlagList lists the variables of envFlags in the order their flags
// appear (global flags first), each with the flags and commands it serves.
func envFlagList(app *cli.App) []envFlag {
	var out []envFlag
	index := map[string]int{}
	cmds := map[string][]string{}
	add := func(f cli.Flag, cmd string) {
		env := envFlags[f.Names()[0]]
		if env == "" {
			return
		}
		if _, ok := index[env]; !ok {
			index[env] = len(out)
			out = append(out, envFlag{env: env})
		}
		if cmd != "" {
			cmds[env] = append(cmds[env], cmd)
		}
	}
	for _, f := range app.Flags {
		add(f, "")
	}
	for _, c := range app.Commands {
		for _, f := range c.Flags {
			add(f, c.Name)
		}
	}
	for i := range out {
		name := ""
		for flag, env := range envFlags {
			if env == out[i].env {
				name = "--" + flag
			}
		}
		if cs := cmds[out[i].env]; len(cs) > 0 {
			name += " (" + strings.Join(cs, ", ") + ")"
		}
		out[i].flag = name
	}
	return out
}
