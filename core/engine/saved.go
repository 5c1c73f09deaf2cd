package engine

import (
	"fmt"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
)

// StaleSavedError refuses a saved plan made against another state or other
// inputs than the run's: applying it would carry out changes nobody
// reviewed against what is there now.
type StaleSavedError struct {
	App    string
	Reason string
}

func (e *StaleSavedError) Error() string {
	return fmt.Sprintf("the saved plan for %s is stale: %s; nothing was changed: make a new plan (gcompose plan -out FILE) and review it", e.App, e.Reason)
}

// checkSaved refuses a saved plan whose state or inputs changed since it
// was made.
func checkSaved(req Request, doc *state.Document) error {
	sp := req.Saved
	stale := func(format string, args ...any) error {
		return &StaleSavedError{App: req.App, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case sp.FormatVersion != plan.FormatVersion:
		return fmt.Errorf("the saved plan has format version %d, this gcompose reads %d", sp.FormatVersion, plan.FormatVersion)
	case sp.App != req.App:
		return stale("it was made for application %q", sp.App)
	case sp.Mode != req.Mode:
		return fmt.Errorf("the saved plan is a %s plan, not a %s plan", sp.Mode, req.Mode)
	case sp.Lineage != doc.Lineage:
		if sp.Lineage == "" {
			return stale("it was made before the first deploy, and the application has been deployed since (state lineage %s)", doc.Lineage)
		}
		return stale("it was made against state lineage %s, the state is now lineage %q", sp.Lineage, doc.Lineage)
	case sp.Serial != doc.Serial:
		return stale("the state changed since it was made (serial %d then, %d now)", sp.Serial, doc.Serial)
	case sp.Mode == plan.Deploy && sp.Inputs != plan.InputsHash(req.Desired):
		return stale("the descriptor inputs changed since it was made (descriptor files, --var, --var-file, secrets or adapter images)")
	}
	for _, s := range sp.Steps {
		if s.Op == plan.Failed {
			return fmt.Errorf("the saved plan could not plan %s (%s): it cannot be applied", s.Resource, s.Error)
		}
	}
	return nil
}

// savedForApply is the saved plan bound to the state it was checked
// against. Its configs are taken from the run's desired set, which hashes
// as the plan's inputs did: the saved file holds them with secrets masked.
func savedForApply(req Request, doc *state.Document) *plan.Plan {
	pl := *req.Saved
	pl.Prior = doc
	pl.Lineage = doc.Lineage // assigned by the first write when the plan was made before the first deploy
	pl.Steps = make([]*plan.Step, len(req.Saved.Steps))
	for i, s := range req.Saved.Steps {
		c := *s
		if r := req.Desired[s.Resource]; r != nil && !s.Remove && pl.Mode == plan.Deploy {
			c.Config = r.Config
		}
		pl.Steps[i] = &c
	}
	return &pl
}
