package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/project"
)

// addressArg is a resource address as the user gave it: a NAME argument
// (gcompose deploy web), --target ADDRESS or --replace ADDRESS. It prints
// as typed: "deploy web", "--target services.web".
type addressArg struct {
	addr string
	flag string // the command (deploy) for a NAME argument, else "--target" or "--replace"
}

func (a addressArg) String() string { return a.flag + " " + a.addr }

// addressArgs are the NAME arguments, --target and --replace addresses, in
// that order.
func addressArgs(c *cli.Context) []addressArg {
	_, names := splitPositional(c)
	var out []addressArg
	for _, n := range names {
		out = append(out, addressArg{addr: n, flag: c.Command.Name})
	}
	for _, flag := range []string{"target", "replace"} {
		for _, a := range c.StringSlice(flag) {
			out = append(out, addressArg{addr: a, flag: "--" + flag})
		}
	}
	return out
}

// checkAddresses rejects a NAME argument, --target or --replace that names
// no resource of the application before any adapter is asked. The planner
// would find it too, but only after the preflight and the sweep have
// called the adapters (seconds on Golem), and it names every address
// --target. A deploy may name what the descriptor lowers to or what is
// deployed; a destroy only what is deployed (it removes nothing else).
// The state is read only when the descriptor does not settle it; when it
// cannot be read (damaged, or lost) the engine says why, so the check is
// left to the planner.
func checkAddresses(ctx context.Context, c *cli.Context, mode plan.Mode, app string, p *project.Project, st *project.State) error {
	given := addressArgs(c)
	if len(given) == 0 {
		return nil
	}
	var desired []string
	if p != nil {
		want, err := p.Desired()
		if err != nil {
			return nil
		}
		desired = slices.Sorted(maps.Keys(want))
	}
	if mode == plan.Deploy && !slices.ContainsFunc(given, func(g addressArg) bool { return !matchesAny(g.addr, desired) }) {
		return nil
	}
	doc, err := st.Load(ctx, app)
	if err != nil {
		return nil
	}
	deployed := slices.Sorted(maps.Keys(doc.Resources))
	known := deployed
	if mode == plan.Deploy {
		known = slices.Compact(slices.Sorted(slices.Values(append(append([]string(nil), desired...), deployed...))))
	}
	for _, g := range given {
		if matchesAny(g.addr, known) {
			continue
		}
		if mode == plan.Destroy && matchesAny(g.addr, desired) {
			return withCode(exitUsage, fmt.Errorf("%s: %s of %s is not deployed, so there is nothing of it to destroy%s", g, g.addr, app, hasList("deployed", known)))
		}
		what, label := "no resource", "it has"
		if mode == plan.Destroy {
			what, label = "no deployed resource", "deployed"
		}
		if !strings.HasPrefix(g.flag, "--") {
			what += " named"
		} else {
			what += " at"
		}
		return withCode(exitUsage, fmt.Errorf("%s: %s has %s %s%s%s", g, app, what, g.addr, plan.SuggestAddress(g.addr, known), hasList(label, known)))
	}
	return nil
}

func matchesAny(addr string, names []string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return plan.Matches(addr, n) })
}

// hasList is "; LABEL: a, b", or "; nothing is deployed".
func hasList(label string, names []string) string {
	if len(names) == 0 {
		return "; nothing is deployed"
	}
	return fmt.Sprintf("; %s: %s", label, strings.Join(names, ", "))
}
