package commands

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// normalizeArgs lets flags come anywhere, as users (and crontab lines) write
// them: a global flag after the command name is moved before it, and a
// command's flags after its paths are moved before them. urfave/cli stops
// reading flags at the first positional argument, so without this
// `pisess migrate TREE --log-file F` would take --log-file for a path.
// Bundled short options are split as getopt splits them: -nq is -n -q,
// and a short option that takes a value takes the rest of the word
// (-j2 is -j 2, -nj2 is -n -j 2). Everything after "--" stays where it
// is; an unknown flag is left with the command's flags, where urfave/cli
// reports it.
func normalizeArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	global := flagArity(app.Flags)
	// urfave/cli adds --help/-h to every flag set when it runs.
	global["help"], global["h"] = false, false
	out := []string{args[0]}
	i := 1
	for i < len(args) && isFlag(args[i]) {
		groups, needsNext := splitShort(args[i], global)
		for _, g := range groups {
			out = append(out, g...)
		}
		if needsNext && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
		i++
	}
	if i >= len(args) {
		return out
	}
	cmd := findCommand(app, args[i])
	if cmd == nil {
		return append(out, args[i:]...)
	}
	local := flagArity(cmd.Flags)
	local["help"], local["h"] = false, false
	both := map[string]bool{}
	for _, m := range []map[string]bool{global, local} {
		for k, v := range m {
			both[k] = v
		}
	}
	var flags, positional []string
	rest := args[i+1:]
	for k := 0; k < len(rest); k++ {
		a := rest[k]
		if a == "--" {
			positional = append(positional, rest[k:]...)
			break
		}
		if !isFlag(a) {
			positional = append(positional, a)
			continue
		}
		groups, needsNext := splitShort(a, both)
		var last *[]string
		for _, g := range groups {
			name := flagName(g[0])
			_, isLocal := local[name]
			last = &flags
			if _, isGlobal := global[name]; isGlobal && !isLocal {
				last = &out
			}
			*last = append(*last, g...)
		}
		if needsNext && k+1 < len(rest) {
			k++
			*last = append(*last, rest[k])
		}
	}
	out = append(out, args[i])
	out = append(out, flags...)
	return append(out, positional...)
}

// splitShort splits a word of bundled one-letter flags, getopt's way: each
// letter is a flag until one that takes a value, which takes the rest of
// the word, or the next word when the rest is empty (needsNext). A word
// that names a flag whole (-json, --dry-run), holds "=", or has a letter
// that is no flag, is left as it is (one group).
func splitShort(a string, arity map[string]bool) (groups [][]string, needsNext bool) {
	whole := [][]string{{a}}
	if strings.HasPrefix(a, "--") || len(a) <= 2 || strings.Contains(a, "=") {
		return whole, takesValue(arity, a)
	}
	if _, known := arity[a[1:]]; known {
		return whole, takesValue(arity, a)
	}
	for k := 1; k < len(a); k++ {
		c := a[k : k+1]
		value, known := arity[c]
		if !known {
			return whole, takesValue(arity, a)
		}
		if !value {
			groups = append(groups, []string{"-" + c})
			continue
		}
		if k+1 < len(a) {
			return append(groups, []string{"-" + c, a[k+1:]}), false
		}
		return append(groups, []string{"-" + c}), true
	}
	return groups, false
}

func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' }

func flagName(a string) string {
	name := strings.TrimLeft(a, "-")
	if k := strings.IndexByte(name, '='); k >= 0 {
		name = name[:k]
	}
	return name
}

// takesValue reports whether the flag token a needs the next argument as
// its value: a known non-boolean flag written without "=".
func takesValue(arity map[string]bool, a string) bool {
	return !strings.Contains(a, "=") && arity[flagName(a)]
}

// flagArity maps every name of every flag to whether it takes a value.
func flagArity(fs []cli.Flag) map[string]bool {
	out := map[string]bool{}
	for _, f := range fs {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			out[n] = !isBool
		}
	}
	return out
}

func findCommand(app *cli.App, name string) *cli.Command {
	for _, c := range app.Commands {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
