package plan

import (
	"context"
	"encoding/json"

	"github.com/gcompose/gcompose/protocol"
)

// Adapters is what the engine needs from adapter images. The Docker-backed
// implementation lives in core/adapter; tests and benchmarks use an in-memory
// one.
type Adapters interface {
	// Describe says what the adapter of an image can do (init, cached).
	Describe(ctx context.Context, image, resource string) (Capabilities, error)
	State(ctx context.Context, c Call, desired string) (*protocol.StateResult, error)
	Action(ctx context.Context, c Call, a protocol.ActionSpec, staleState json.RawMessage) (*ActionOutcome, error)
}

// Capabilities of an adapter, from its init answer.
type Capabilities struct {
	// Destroy is true for adapters that speak the gcompose protocol: their
	// state call understands desired=absent. Plain Deployster adapters cannot
	// remove what they made; destroy forgets their resources with a warning.
	Destroy bool
}

// Call identifies one resource for a state or action call.
type Call struct {
	App       string
	Name      string
	Type      string
	Config    map[string]any
	Persisted *protocol.Persisted
}

// ActionOutcome is what an action produced.
type ActionOutcome struct {
	Output   string
	Identity map[string]any
}
