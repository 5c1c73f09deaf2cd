package engine

import (
	"context"
	"encoding/json"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/protocol"
)

// ContainerAdapters drives adapter images through the protocol client: the
// engine's plan.Adapters for real deployments.
type ContainerAdapters struct {
	Client *adapter.Client
	// Plugs are the descriptor's plugs; each call mounts the ones its
	// adapter declared and that apply to the resource.
	Plugs map[string]adapter.Plug
}

func (a *ContainerAdapters) Describe(ctx context.Context, image, resource string) (plan.Capabilities, error) {
	info, err := a.Client.Init(ctx, image, resource)
	if err != nil {
		return plan.Capabilities{}, err
	}
	return plan.Capabilities{Destroy: info.Ext}, nil
}

func (a *ContainerAdapters) target(c plan.Call) adapter.Target {
	return adapter.Target{App: c.App, Name: c.Name, Image: c.Type, Config: c.Config, Plugs: a.Plugs}
}

func (a *ContainerAdapters) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	return a.Client.State(ctx, a.target(c), desired, c.Persisted)
}

func (a *ContainerAdapters) Action(ctx context.Context, c plan.Call, act protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	res, err := a.Client.Action(ctx, a.target(c), act, stale, c.Persisted)
	if res == nil {
		return nil, err
	}
	return &plan.ActionOutcome{Output: res.Output, Identity: res.Identity}, err
}
