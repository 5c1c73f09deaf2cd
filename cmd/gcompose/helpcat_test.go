package main

import (
	"testing"

	"github.com/urfave/cli/v2"
)

// Every flag of every command is filed under a help heading: a flag
// without one is listed above the headings, apart from its kind.
func TestEveryFlagHasAHelpCategory(t *testing.T) {
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			for _, f := range c.Flags {
				if cf, ok := f.(cli.CategorizableFlag); ok && cf.GetCategory() == "" {
					t.Errorf("gcompose %s%s --%s has no help category (help.go flagCategory)", path, c.Name, f.Names()[0])
				}
			}
			walk(path+c.Name+" ", c.Subcommands)
		}
	}
	walk("", newApp(nil, nil, nil).Commands)
}
