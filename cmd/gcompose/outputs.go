package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/jsondiff"
	"github.com/gcompose/gcompose/core/project"
)

// printOutputs ends a deploy with the application's outputs.
func printOutputs(w io.Writer, values map[string]any) {
	if len(values) == 0 {
		return
	}
	names := make([]string, 0, len(values))
	width := 0
	for n := range values {
		names = append(names, n)
		width = max(width, len(n))
	}
	sort.Strings(names)
	fmt.Fprintln(w, "\nOutputs:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-*s = %s\n", width, n, outputText(values[n]))
	}
}

// outputText is a string as it is (what a user pastes into a browser),
// anything else as JSON.
func outputText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return jsondiff.Text(v)
}

func outputCommand() *cli.Command {
	return &cli.Command{
		Name:      "output",
		Usage:     "print the application's outputs (the descriptor's outputs section) as the state has them",
		ArgsUsage: "[NAME]",
		Description: `Evaluates the descriptor's outputs: section against what the state records each resource reports.
   With NAME, prints that one value alone (a string raw, anything else as JSON), for scripts:
   curl "$(gcompose output url)".`,
		Flags: append(append(descriptorFlags(), stateFlags()...),
			&cli.BoolFlag{Name: "json", Usage: "print the outputs (or the one named) as JSON"}),
		Action: runOutput,
	}
}

func runOutput(c *cli.Context) error {
	// The positional argument is an output's name, not a descriptor.
	p, err := loadFiles(c, fileArgs(c))
	if err != nil {
		return err
	}
	name := p.Name()
	if c.String("app") != "" {
		name = c.String("app")
	}
	codec, err := stateCodec(c)
	if err != nil {
		return err
	}
	st, err := openStore(c)
	if err != nil {
		return err
	}
	// Through the secret guard: secret values are decrypted and learnt, so
	// an output that holds one is masked.
	doc, err := st.LoadGuarded(c.Context, name, codec, redactor(c))
	st.Close()
	if err != nil {
		return withCode(exitError, err)
	}
	outs := project.AppOutputs(doc, p.Outputs())
	if outs.Err != nil {
		return withCode(exitError, outs.Err)
	}
	values, missing := redactor(c).MaskMap(outs.Values), outs.Missing
	if c.NArg() > 1 {
		return withCode(exitUsage, fmt.Errorf("output takes at most one NAME, got %d", c.NArg()))
	}
	if want := c.Args().First(); want != "" {
		v, ok := values[want]
		if !ok {
			if len(values) == 0 {
				return withCode(exitError, fmt.Errorf("no output named %q: the descriptor declares no outputs (an outputs: section)", want))
			}
			return withCode(exitError, fmt.Errorf("no output named %q; the descriptor declares: %s", want, strings.Join(sortedNames(values), ", ")))
		}
		for _, m := range missing {
			if strings.HasPrefix(m, want+" ") {
				return withCode(exitError, fmt.Errorf("output %s", m))
			}
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, v)
		}
		fmt.Fprintln(c.App.Writer, outputText(v))
		return nil
	}
	if c.Bool("json") {
		if values == nil {
			values = map[string]any{}
		}
		return printJSON(c.App.Writer, values)
	}
	if len(values) == 0 {
		fmt.Fprintln(c.App.ErrWriter, "The descriptor declares no outputs (add an outputs: section, docs/descriptor.md).")
		return nil
	}
	printOutputs(c.App.Writer, values)
	for _, m := range missing {
		fmt.Fprintln(c.App.ErrWriter, "warning: output "+m)
	}
	return nil
}

func sortedNames(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
