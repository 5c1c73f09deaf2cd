// Package memadapter is an in-process adapter for fast engine tests and
// benchmarks: it "creates" resources in a map. It is never the only test of
// the adapter boundary; the Docker-backed adapters are tested for real.
package memadapter

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/protocol"
)

// Adapter keeps objects in memory. Each object's outputs are its config plus
// "id" and "generation" (bumped by every create or update).
type Adapter struct {
	// ActionDelay is slept in every action (to model real work).
	ActionDelay time.Duration
	// FailActions makes actions of these resources fail.
	FailActions map[string]bool
	// FailState makes state calls of these resources fail.
	FailState map[string]bool
	// Plain makes the adapter behave like a plain Deployster adapter
	// (no destroy support).
	Plain bool
	// Rebuild lists config keys whose change forces a rebuild.
	Rebuild []string

	mu      sync.Mutex
	objects map[string]map[string]any
	gen     int
	log     []string

	StateCalls, ActionCalls, DescribeCalls atomic.Int64
}

// New returns an empty adapter.
func New() *Adapter { return &Adapter{objects: map[string]map[string]any{}} }

func (a *Adapter) Describe(ctx context.Context, image, resource string) (plan.Capabilities, error) {
	a.DescribeCalls.Add(1)
	return plan.Capabilities{Destroy: !a.Plain}, nil
}

// Objects returns a copy of what exists.
func (a *Adapter) Objects() map[string]map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]map[string]any, len(a.objects))
	for k, v := range a.objects {
		out[k] = maps.Clone(v)
	}
	return out
}

// Log returns "create x", "update y", "delete z" in the order they happened.
func (a *Adapter) Log() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.log...)
}

// Remove deletes an object behind the engine's back (drift).
func (a *Adapter) Remove(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.objects, name)
}

func (a *Adapter) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	a.StateCalls.Add(1)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.FailState[c.Name] {
		return nil, fmt.Errorf("%s: state call: adapter broken on purpose", c.Name)
	}
	obj, exists := a.objects[c.Name]
	if desired == protocol.Absent {
		if !exists {
			return &protocol.StateResult{Status: protocol.Valid, State: map[string]any{}}, nil
		}
		return stale(protocol.ChangeDelete, "delete", "", nil), nil
	}
	if !exists {
		return stale(protocol.ChangeCreate, "create", "does not exist", nil), nil
	}
	cfg := configOf(obj)
	if !plan.SameJSON(cfg, c.Config) {
		var forces []string
		for _, k := range a.Rebuild {
			if !plan.SameJSON(cfg[k], c.Config[k]) {
				forces = append(forces, "/"+k)
			}
		}
		if len(forces) > 0 {
			return stale(protocol.ChangeRebuild, "rebuild", "config changed", forces), nil
		}
		return stale(protocol.ChangeUpdate, "update", "config changed", nil), nil
	}
	return &protocol.StateResult{Status: protocol.Valid, State: maps.Clone(obj)}, nil
}

func stale(change, action, reason string, forces []string) *protocol.StateResult {
	return &protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: action}},
		Gcompose: &protocol.StateExt{Change: change, Reason: reason, Forces: forces}}
}

func (a *Adapter) Action(ctx context.Context, c plan.Call, act protocol.ActionSpec, _ json.RawMessage) (*plan.ActionOutcome, error) {
	a.ActionCalls.Add(1)
	if a.ActionDelay > 0 {
		select {
		case <-time.After(a.ActionDelay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.FailActions[c.Name] {
		return nil, fmt.Errorf("%s failed on purpose", act.Name)
	}
	a.log = append(a.log, act.Name+" "+c.Name)
	switch act.Name {
	case "delete":
		delete(a.objects, c.Name)
		return &plan.ActionOutcome{}, nil
	case "create", "update", "rebuild":
		a.gen++
		obj := maps.Clone(c.Config)
		if obj == nil {
			obj = map[string]any{}
		}
		obj["id"] = c.Name
		obj["generation"] = float64(a.gen)
		a.objects[c.Name] = obj
		return &plan.ActionOutcome{Identity: map[string]any{"id": c.Name}}, nil
	}
	return nil, fmt.Errorf("unknown action %q", act.Name)
}

func configOf(obj map[string]any) map[string]any {
	cfg := maps.Clone(obj)
	delete(cfg, "id")
	delete(cfg, "generation")
	return cfg
}
