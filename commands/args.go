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
// Everything after "--" stays where it is; an unknown flag is left with
// the command's flags, where urfave/cli reports it.
func normalizeArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	global := flagArity(app.Flags)
	i := 1
	for i < len(args) && isFlag(args[i]) {
		if takesValue(global, args[i]) {
			i++
		}
		i++
	}
	if i >= len(args) {
		return args
	}
	cmd := findCommand(app, args[i])
	if cmd == nil {
		return args
	}
	local := flagArity(cmd.Flags)
	out := append([]string{}, args[:i]...)
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
		name := flagName(a)
		_, isLocal := local[name]
		group := &flags
		arity := local
		if _, isGlobal := global[name]; isGlobal && !isLocal {
			group, arity = &out, global
		}
		*group = append(*group, a)
		if takesValue(arity, a) && k+1 < len(rest) {
			k++
			*group = append(*group, rest[k])
		}
	}
	out = append(out, args[i])
	out = append(out, flags...)
	return append(out, positional...)
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
