package commands

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
)

// Shell completion. The scripts of bash, zsh and fish are thin: each hands
// the words typed so far to `pisess __complete WORD...` (the last word is
// the one under the cursor, "" for a new one) and shows what it prints.
// The words are worked out here, from the command definitions — the same
// definitions --help, the man page and the README tables come from — so
// that the three shells complete the same commands, flags and flag values.

// completeCommand is the hidden command the scripts call. Main answers it
// before urfave/cli parses anything: the words are the user's, flags
// included, and must not be taken for __complete's own.
const completeCommand = "__complete"

// completeFiles is the line __complete prints when file names complete
// the word too (a PATH argument, --log-file FILE).
const completeFiles = ":files"

// candidate is one completion: the word and, for zsh and fish, what it is.
type candidate struct{ word, help string }

// complete returns the completions of the last of words (the words after
// the program name) and whether file names complete it too.
func complete(app *cli.App, words []string) (out []candidate, files bool) {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	global := flagArity(app.Flags)
	global["help"], global["h"] = false, false
	arity := global
	var cmd *cli.Command
	var pending string // a flag waiting for its value
	var trees []string // rollback's --tree values, whose journals name the runs
	dashdash, positional := false, 0
	for _, w := range before {
		switch {
		case pending != "":
			if pending == "tree" {
				trees = append(trees, w)
			}
			pending = ""
		case dashdash || !isFlag(w):
			if cmd == nil && !dashdash {
				if cmd = findCommand(app, w); cmd == nil && w == "help" {
					cmd = &cli.Command{Name: "help", ArgsUsage: "COMMAND"}
				}
				if cmd != nil {
					arity = flagArity(cmd.Flags)
					arity["help"], arity["h"] = false, false
					for k, v := range global {
						if _, ok := arity[k]; !ok {
							arity[k] = v
						}
					}
					continue
				}
			}
			positional++
		case w == "--":
			dashdash = true
		default:
			if v, ok := strings.CutPrefix(w, "--tree="); ok {
				trees = append(trees, v)
			}
			groups, needsNext := splitShort(w, arity)
			if needsNext {
				pending = flagName(groups[len(groups)-1][0])
			}
		}
	}
	flags := app.Flags
	if cmd != nil {
		flags = append(append([]cli.Flag{}, cmd.Flags...), app.Flags...)
	}
	switch {
	case pending != "":
		return flagValueCandidates(flags, pending, "", cur)
	case !dashdash && strings.HasPrefix(cur, "-") && strings.Contains(cur, "="):
		name, _, _ := strings.Cut(cur, "=")
		return flagValueCandidates(flags, flagName(name), name+"=", cur)
	case !dashdash && strings.HasPrefix(cur, "-"):
		return flagCandidates(flags, cmd == nil, cur), false
	case cmd == nil:
		return commandCandidates(app, cur), false
	case cmd.Name == "help":
		if positional == 0 {
			return commandCandidates(app, cur), false
		}
		return nil, false
	}
	toCheckpoint := slices.ContainsFunc(before, func(w string) bool {
		return isFlag(w) && flagName(strings.SplitN(w, "=", 2)[0]) == "to-checkpoint"
	})
	if cmd.Name == "rollback" && positional == 0 && !toCheckpoint {
		// rollback's argument is a run: the correlation ids its trees'
		// journals hold (of the default tree without --tree), newest first.
		return runCandidates(trees, cur), false
	}
	if words, ok := argValues[cmd.Name]; ok {
		if positional == 0 {
			return prefixed(words, "", cur), false
		}
		return nil, false
	}
	return nil, cmd.ArgsUsage != ""
}

// runCandidates are the correlation ids of the runs the journals of trees
// (paths inside them; the default tree when none) record, newest first,
// each with its command and start time; what cannot be read offers
// nothing.
func runCandidates(trees []string, cur string) []candidate {
	rep, err := runRuns(context.Background(), runsOptions{Paths: trees})
	if err != nil {
		return nil
	}
	var out []candidate
	for _, t := range rep.Trees {
		for i := len(t.Runs) - 1; i >= 0; i-- {
			if r := t.Runs[i]; strings.HasPrefix(r.CorrelationID, cur) {
				out = append(out, candidate{r.CorrelationID, strings.TrimSpace(r.Command + " " + r.Start)})
			}
		}
	}
	return out
}

// commandCandidates are the commands (not their aliases) and help.
func commandCandidates(app *cli.App, cur string) []candidate {
	var out []candidate
	for _, c := range app.Commands {
		if !c.Hidden && strings.HasPrefix(c.Name, cur) {
			out = append(out, candidate{c.Name, c.Usage})
		}
	}
	if strings.HasPrefix("help", cur) {
		out = append(out, candidate{"help", "show the commands, or one command's help"})
	}
	return out
}

// flagCandidates are the flags a command takes and the global ones, long
// names first; one-letter names only for a word that begins with one
// dash.
func flagCandidates(flags []cli.Flag, global bool, cur string) []candidate {
	all := append(append([]cli.Flag{}, flags...), cli.HelpFlag)
	if global {
		all = append(all, cli.VersionFlag)
	}
	var out []candidate
	seen := map[string]bool{}
	for _, f := range all {
		help := ""
		if df, ok := f.(cli.DocGenerationFlag); ok {
			_, help = unquoteUsage(df.GetUsage())
		}
		for _, n := range f.Names() {
			word := "--" + n
			if len(n) == 1 {
				if strings.HasPrefix(cur, "--") {
					continue
				}
				word = "-" + n
			}
			if !seen[word] && strings.HasPrefix(word, cur) {
				seen[word] = true
				out = append(out, candidate{word, help})
			}
		}
	}
	return out
}

// flagValueCandidates completes the value of the flag name: its words
// (flagValues), or file names for a flag that takes a file.
func flagValueCandidates(flags []cli.Flag, name, prefix, cur string) ([]candidate, bool) {
	if words, ok := flagValues[name]; ok {
		return prefixed(words, prefix, cur), false
	}
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return nil, takesFile(f) && prefix == ""
		}
	}
	return nil, false
}

// takesFile reports whether a flag's value is a path (TakesFile in its
// definition).
func takesFile(f cli.Flag) bool {
	switch f := f.(type) {
	case *cli.StringFlag:
		return f.TakesFile
	case *cli.StringSliceFlag:
		return f.TakesFile
	case *cli.PathFlag:
		return f.TakesFile
	case *cli.GenericFlag:
		return f.TakesFile
	}
	return false
}

func prefixed(words []string, prefix, cur string) []candidate {
	var out []candidate
	for _, w := range words {
		if strings.HasPrefix(prefix+w, cur) {
			out = append(out, candidate{prefix + w, ""})
		}
	}
	return out
}

// runComplete answers `pisess __complete WORD...`: one candidate a line,
// "word<TAB>what it is" when there is something to say, then ":files"
// when file names complete the word too.
func runComplete(app *cli.App, words []string, w io.Writer) int {
	cands, files := complete(app, words)
	for _, c := range cands {
		if help := firstLine(c.help); help != "" {
			fmt.Fprintf(w, "%s\t%s\n", c.word, help)
		} else {
			fmt.Fprintln(w, c.word)
		}
	}
	if files {
		fmt.Fprintln(w, completeFiles)
	}
	return ExitClean
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func completionCommand(r *run) *cli.Command {
	return command(&cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (" + orList(completionShells) + ")",
		ArgsUsage: strings.Join(completionShells, "|"),
		Description: `Prints a completion script for the shell named, to be sourced, e.g.
   source <(pisess completion bash)      # in ~/.bashrc
   pisess completion zsh > "${fpath[1]}/_pisess"
   pisess completion fish > ~/.config/fish/completions/pisess.fish
The scripts complete commands, flags (also after other flags, and bundled
ones such as -nq), the words of flags that take one of a few (--log-format,
--log-level) and of completion's SHELL, and file names where a path goes;
they ask pisess itself, so they follow the installed version.`,
		Action: func(c *cli.Context) error {
			a, err := args(c, "SHELL")
			if err != nil {
				return err
			}
			script, ok := completionScripts[a[0]]
			if !ok {
				return engine.Usagef("completion %q: want %s", a[0], orList(completionShells))
			}
			r.text = func(w io.Writer) { io.WriteString(w, script) }
			return nil
		},
	}, exitStatusHelp("0   printed", "16  no shell, or one pisess has no script for"))
}

// completionScripts are the scripts of completionShells. Each passes the
// words up to the cursor to pisess __complete, keeping an empty last word
// (a new word), and shows the answer; ":files" adds the shell's own file
// name completion.
var completionScripts = map[string]string{
	// bash splits words at COMP_WORDBREAKS (= and : among them), so the
	// words are taken from COMP_LINE, split at blanks only, and each answer
	// loses the part of the word before bash's current word (--log-level=
	// for --log-level=de).
	"bash": `# bash completion for pisess
_pisess_complete() {
    local line=${COMP_LINE:0:COMP_POINT}
    local -a words
    read -r -a words <<< "$line"
    [[ $line =~ [[:space:]]$ ]] && words+=("")
    local want=${words[${#words[@]}-1]}
    local cur=${COMP_WORDS[COMP_CWORD]}
    [[ $want == *"$cur" ]] || cur=$want
    local pre=${want:0:${#want}-${#cur}}
    local out c files=0
    out=$("${words[0]}" __complete "${words[@]:1}" 2>/dev/null) || return 0
    COMPREPLY=()
    while IFS= read -r c; do
        [[ -z $c ]] && continue
        if [[ $c == :files ]]; then files=1; continue; fi
        c=${c%%$'\t'*}
        COMPREPLY+=("${c#"$pre"}")
    done <<< "$out"
    if (( files )); then
        local IFS=$'\n'
        COMPREPLY+=($(compgen -f -- "$cur"))
    fi
}
complete -o filenames -F _pisess_complete pisess
`,
	// As a file in $fpath (autoloaded) or sourced: the last lines run the
	// function when zsh autoloads it for the first completion.
	"zsh": `#compdef pisess
# zsh completion for pisess
_pisess() {
    local -a cands
    local c word files=0
    for c in "${(@f)$("${words[1]}" __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}"; do
        [[ -z $c ]] && continue
        if [[ $c == :files ]]; then files=1; continue; fi
        word=${c%%$'\t'*}
        if [[ $c == *$'\t'* ]]; then
            cands+=("${word//:/\\:}:${c#*$'\t'}")
        else
            cands+=("${word//:/\\:}")
        fi
    done
    (( ${#cands} )) && _describe -t pisess 'pisess' cands
    (( files )) && _files
    return 0
}
if [[ $funcstack[1] == _pisess ]]; then
    _pisess "$@"
else
    compdef _pisess pisess
fi
`,
	// fish shows "word<TAB>description" as it is.
	"fish": `# fish completion for pisess
function __pisess_complete
    set -l words (commandline -opc)
    set -l cur (commandline -ct)
    for c in ($words[1] __complete $words[2..-1] "$cur" 2>/dev/null)
        if test "$c" = ":files"
            __fish_complete_path "$cur"
        else
            echo $c
        end
    end
end
complete -c pisess -f -a '(__pisess_complete)'
`,
}
