package engine

import (
	"fmt"
	"strings"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/protocol"
)

// ExistingError stops a first deploy (no state for the application) when
// objects of the application already exist: deploying would make a second
// copy of each, next to ones no state of this run names.
type ExistingError struct {
	App   string
	Found []string
}

func (e *ExistingError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "app %q has no state here, but objects of it already exist:\n", e.App)
	for _, f := range e.Found {
		fmt.Fprintf(&b, "  - %s\n", f)
	}
	fmt.Fprintf(&b, "A first deploy would create a second copy of each. If the application's state is elsewhere, use it "+
		"(--state, GCOMPOSE_STATE or state: in .gcompose/config.yaml); if it was lost here, rebuild it (gcompose state recover --app %s). "+
		"To remove these objects, destroy them with the state that owns them (a container: docker rm -f NAME). "+
		"To deploy a second copy next to them anyway, pass --force-new-state.", e.App)
	return b.String()
}

// ExistingObject is something of an application that exists outside
// gcompose's adapter calls (Engine.Existing).
type ExistingObject struct {
	// Description is the object in a sentence, for messages.
	Description string
	// Adapter is the adapter image that made it, when the object says so.
	Adapter string
}

// checkFirstDeploy runs before a first deploy writes the application's
// lineage: it gathers what already exists of the application (existing:
// containers found by their labels, Engine.Existing; and what the
// report-only sweep found) and refuses
// unless the request forces a new state. A plan only warns.
//
// A container made by an adapter whose sweep answered (sweptTypes) is left
// to that sweep: the adapter knows which of its objects can collide with
// this run's (the Golem ones: those of the same yagna node) and reports
// those; the same app name deployed through another yagna on this machine
// is no second copy of this one.
func (e *Engine) checkFirstDeploy(req Request, existing []ExistingObject, swept []Swept, sweptTypes map[string]bool) error {
	var found []string
	for _, o := range existing {
		if o.Adapter != "" && sweptTypes[o.Adapter] {
			continue
		}
		found = append(found, o.Description)
	}
	for _, s := range swept {
		if s.Action == protocol.OrphanReported {
			found = append(found, s.Describe(""))
		}
	}
	if len(found) == 0 || req.Mode != plan.Deploy {
		return nil
	}
	err := &ExistingError{App: req.App, Found: found}
	switch {
	case req.ForceNewState:
		e.note("deploying a new state next to what exists of %s (--force-new-state): %s", req.App, strings.Join(found, "; "))
		return nil
	case req.PlanOnly:
		e.note("%s", strings.TrimSuffix(strings.Replace(err.Error(), "A first deploy would", "deploy would refuse: it would", 1), "\n"))
		return nil
	}
	return err
}

func (e *Engine) note(format string, args ...any) {
	if e.Log != nil {
		e.Log(format, args...)
	}
}
