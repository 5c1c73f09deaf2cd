package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
)

// PreflightError says why nothing was planned: what some adapters cannot
// work without (a variable not set, an API that does not answer, a
// credential refused), once per problem with the adapter types it stops,
// instead of the same error from every resource's calls.
type PreflightError struct {
	Problems []Problem
}

// Problem is one thing wrong before planning and the adapter types that
// reported it.
type Problem struct {
	Problem string
	Types   []string
}

func (e *PreflightError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		who := "adapter " + p.Types[0]
		if len(p.Types) > 1 {
			who = "adapters " + strings.Join(p.Types, ", ")
		}
		lines[i] = fmt.Sprintf("%s (%s), so nothing was planned", p.Problem, who)
	}
	return strings.Join(lines, "\n")
}

// typesOf are the adapter types of the desired resources and of the state,
// sorted, each with one of its resources (the first by name), whose plugs a
// call for the whole type mounts. A nil doc has none.
func typesOf(desired map[string]*plan.Resource, doc *state.Document) ([]string, map[string]string) {
	first := map[string]string{}
	note := func(typ, name string) {
		if cur, ok := first[typ]; !ok || name < cur {
			first[typ] = name
		}
	}
	for name, r := range desired {
		note(r.Type, name)
	}
	if doc != nil {
		for name, r := range doc.Resources {
			note(r.Type, name)
		}
	}
	types := make([]string, 0, len(first))
	for t := range first {
		types = append(types, t)
	}
	sort.Strings(types)
	return types, first
}

// preflight asks every adapter type of the run, in parallel, whether it can
// work at all (plan.Adapters.Check). Identical problems from several types
// are one line. A check call that itself failed is a problem too: nothing
// could be planned reliably past it.
// eachType calls fn for every adapter type, at most e.Parallelism at a
// time (one call per adapter, as preflight and sweep make), and returns when
// all are done; fn writes its answer at index i.
func (e *Engine) eachType(types []string, fn func(i int, typ string)) {
	limit := make(chan struct{}, max(e.Parallelism, 1))
	var wg sync.WaitGroup
	for i, typ := range types {
		wg.Add(1)
		go func() {
			defer wg.Done()
			limit <- struct{}{}
			defer func() { <-limit }()
			fn(i, typ)
		}()
	}
	wg.Wait()
}

func (e *Engine) preflight(ctx context.Context, app string, mode plan.Mode, desired map[string]*plan.Resource, doc *state.Document) error {
	types, first := typesOf(desired, doc)
	problems := make([]string, len(types))
	e.eachType(types, func(i int, typ string) {
		res, err := e.Adapters.Check(ctx, plan.CheckCall{App: app, Lineage: doc.Lineage, Type: typ, Resource: first[typ], Mode: mode})
		switch {
		case errors.Is(err, plan.ErrNoCheck):
		case err != nil:
			problems[i] = fmt.Sprintf("the check call failed: %v", err)
		case !res.OK:
			problems[i] = res.Problem
		}
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	byProblem := map[string]int{}
	pe := &PreflightError{}
	for i, p := range problems {
		if p == "" {
			continue
		}
		j, ok := byProblem[p]
		if !ok {
			j = len(pe.Problems)
			byProblem[p] = j
			pe.Problems = append(pe.Problems, Problem{Problem: p})
		}
		pe.Problems[j].Types = append(pe.Problems[j].Types, types[i])
	}
	if len(pe.Problems) == 0 {
		return nil
	}
	return pe
}
