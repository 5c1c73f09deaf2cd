package main

import (
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// completionFlag is what the shell completion scripts append (urfave/cli's
// --generate-bash-completion); urfave/cli only sees it as the last argument.
const completionFlag = "--generate-bash-completion"

// reorderArgs moves a command's flags before its positional arguments.
// urfave/cli stops parsing flags at the first positional argument, but users
// write `gcompose deploy app.yaml --yes` as often as `gcompose deploy --yes
// app.yaml`; both must mean the same. Flags before the command (gcompose
// -f app.yaml logs) stay where they are.
func reorderArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	completing := args[len(args)-1] == completionFlag
	if completing {
		args = args[:len(args)-1]
	}
	out := []string{args[0]}
	i := 1
	// Global flags: gcompose -f app.yaml deploy.
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-" && args[i] != "--" {
		out = append(out, args[i])
		if !strings.Contains(args[i], "=") && flagTakesValue(app.Flags, args[i]) && i+1 < len(args) {
			out = append(out, args[i+1])
			i++
		}
		i++
	}
	cmds := app.Commands
	var cmd *cli.Command
	// Walk the command path (gcompose state show ...).
	for i < len(args) {
		c := findCommand(cmds, args[i])
		if c == nil {
			break
		}
		out = append(out, args[i])
		cmd = c
		cmds = c.Subcommands
		i++
	}
	if cmd == nil {
		out = append(out, args[i:]...)
		return withCompletion(out, completing)
	}
	var flags, positional []string
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if cmd.Name == "logs" && a == "-f" && !(i+1 < len(args) && looksLikeDescriptor(args[i+1])) {
			// docker compose logs -f: follow, when what comes next cannot
			// be a descriptor (nothing, a flag, a service name).
			flags = append(flags, "--follow")
			continue
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			flags = append(flags, a)
			if !strings.Contains(a, "=") && flagTakesValue(cmd.Flags, a) && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		positional = append(positional, a)
	}
	out = append(out, flags...)
	if completing {
		// Completion of a positional argument: urfave/cli completes what
		// it is given, and "--" would end the flags before the marker.
		return append(append(out, positional...), completionFlag)
	}
	if len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
	}
	return out
}

func withCompletion(args []string, completing bool) []string {
	if completing {
		return append(args, completionFlag)
	}
	return args
}

// looksLikeDescriptor tells whether arg names a descriptor: a .yaml, .yml
// or .zip name, or an existing file.
func looksLikeDescriptor(arg string) bool {
	for _, ext := range []string{".yaml", ".yml", ".zip"} {
		if strings.HasSuffix(arg, ext) {
			return true
		}
	}
	fi, err := os.Stat(arg)
	return err == nil && fi.Mode().IsRegular()
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
		for _, a := range c.Aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}

// flagTakesValue reports whether the flag named by arg (-f, --file)
// expects a value.
func flagTakesValue(flags []cli.Flag, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			if _, isBool := f.(*cli.BoolFlag); isBool {
				return false
			}
			return true
		}
	}
	return false
}
