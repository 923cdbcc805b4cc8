package commands

import (
	"fmt"
	"io"
	"runtime/debug"
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

// Version is pisess's version: the module version, the VCS revision and
// the Go version it was built with.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "pisess (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	rev, dirty, at := "", "", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		case "vcs.time":
			at = " " + s.Value
		}
	}
	if rev == "" {
		rev = "unknown revision"
	}
	return fmt.Sprintf("pisess %s (%s%s%s) %s", v, rev, dirty, at, bi.GoVersion)
}

func versionCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:  "version",
		Usage: "print pisess's version, VCS revision and Go version",
		Action: func(c *cli.Context) error {
			r.text = func(w io.Writer) { fmt.Fprintln(w, Version()) }
			return nil
		},
	}, exitStatusHelp("0   printed"))
}

func completionCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "bash|zsh|fish",
		Description: `Prints a completion script for the shell named, to be sourced, e.g.
   source <(pisess completion bash)      # in ~/.bashrc
   pisess completion zsh > "${fpath[1]}/_pisess"
   pisess completion fish > ~/.config/fish/completions/pisess.fish`,
		Action: func(c *cli.Context) error {
			a, err := args(c, "SHELL")
			if err != nil {
				return err
			}
			var script string
			switch a[0] {
			case "bash":
				script = bashCompletion
			case "zsh":
				script = zshCompletion
			case "fish":
				script = fishCompletion(c.App)
			default:
				return engine.Usagef("completion %q: want bash, zsh or fish", a[0])
			}
			r.text = func(w io.Writer) { io.WriteString(w, script) }
			return nil
		},
	}, exitStatusHelp("0   printed", "16  no shell, or one pisess has no script for"))
}

func manCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:  "man",
		Usage: "print the man page (roff), made from the command definitions",
		Description: `Prints pisess(1) in roff, generated from the same definitions as --help:
   pisess man > pisess.1 && man ./pisess.1`,
		Action: func(c *cli.Context) error {
			page, err := c.App.ToManWithSection(1)
			if err != nil {
				return err
			}
			r.text = func(w io.Writer) { io.WriteString(w, page) }
			return nil
		},
	}, exitStatusHelp("0   printed"))
}

// The completion scripts ask pisess itself for the words: urfave/cli
// answers --generate-bash-completion with the commands, or with the flags
// of the command already typed.
const bashCompletion = `# bash completion for pisess
_pisess_complete() {
    local words
    words=$("${COMP_WORDS[0]}" "${COMP_WORDS[@]:1:$((COMP_CWORD-1))}" --generate-bash-completion 2>/dev/null)
    COMPREPLY=($(compgen -W "$words" -- "${COMP_WORDS[COMP_CWORD]}"))
    if [ ${#COMPREPLY[@]} -eq 0 ]; then
        COMPREPLY=($(compgen -f -- "${COMP_WORDS[COMP_CWORD]}"))
    fi
}
complete -o filenames -F _pisess_complete pisess
`

const zshCompletion = `#compdef pisess
# zsh completion for pisess
_pisess() {
    local -a words_
    words_=(${(f)"$(${words[1]} ${words[2,CURRENT-1]} --generate-bash-completion 2>/dev/null)"})
    if (( ${#words_} )); then
        compadd -- $words_
    else
        _files
    fi
}
compdef _pisess pisess
`

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

// fishCompletion writes fish's completions from the command definitions
// (urfave/cli's own generator recurses forever on its shared help
// command once an app has run in the same process).
func fishCompletion(app *cli.App) string {
	var b strings.Builder
	b.WriteString("# fish completion for pisess\ncomplete -c pisess -f\n")
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }
	flag := func(cond string, f cli.Flag) {
		fmt.Fprintf(&b, "complete -c pisess -n %s", quote(cond))
		for _, n := range f.Names() {
			if len(n) == 1 {
				fmt.Fprintf(&b, " -s %s", n)
			} else {
				fmt.Fprintf(&b, " -l %s", n)
			}
		}
		if df, ok := f.(cli.DocGenerationFlag); ok {
			if df.TakesValue() {
				b.WriteString(" -r")
			}
			fmt.Fprintf(&b, " -d %s", quote(df.GetUsage()))
		}
		b.WriteString("\n")
	}
	for _, f := range app.Flags {
		flag("true", f)
	}
	for _, c := range app.Commands {
		if c.Hidden {
			continue
		}
		fmt.Fprintf(&b, "complete -c pisess -n '__fish_use_subcommand' -a %s -d %s\n", c.Name, quote(c.Usage))
		for _, f := range c.Flags {
			flag("__fish_seen_subcommand_from "+c.Name, f)
		}
		if c.ArgsUsage != "" {
			fmt.Fprintf(&b, "complete -c pisess -n '__fish_seen_subcommand_from %s' -F\n", c.Name)
		}
	}
	return b.String()
}
