package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// reorderArgs moves a command's flags before its positional arguments.
// urfave/cli stops parsing flags at the first positional argument, but users
// write `gcompose deploy app.yaml --yes` as often as `gcompose deploy --yes
// app.yaml`; both must mean the same.
func reorderArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	cmds := app.Commands
	i := 1
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
		return args
	}
	var flags, positional []string
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			flags = append(flags, a)
			if !strings.Contains(a, "=") && takesValue(cmd, a) && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		positional = append(positional, a)
	}
	out = append(out, flags...)
	if len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
	}
	return out
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

// takesValue reports whether the flag named by arg (-f, --file) expects a value.
func takesValue(cmd *cli.Command, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	for _, f := range cmd.Flags {
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
