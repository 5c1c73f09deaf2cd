package protocol

import (
	"encoding/json"
	"fmt"
)

// Calls, as named in RequestExt.Call and serve-mode requests.
const (
	CallInit   = "init"
	CallState  = "state"
	CallAction = "action"
	CallSweep  = "sweep"
	CallCheck  = "check"
)

// ServeArg is the single argument a served adapter container is started
// with (InitExt.Serve).
const ServeArg = "serve"

// SweepArg is the single argument of a one-shot sweep container.
const SweepArg = "sweep"

// CheckArg is the single argument of a one-shot check container.
const CheckArg = "check"

// CheckVersion tells whether gcompose can talk to an adapter that answered
// init with protocol version v (0: a plain Deployster adapter, no extension).
func CheckVersion(v int) error {
	switch {
	case v == 0 || v == Version:
		return nil
	case v > Version:
		return fmt.Errorf("adapter speaks gcompose protocol %d, this gcompose speaks %d: upgrade gcompose", v, Version)
	default:
		return fmt.Errorf("adapter speaks gcompose protocol %d, this gcompose speaks %d: upgrade the adapter", v, Version)
	}
}

// MarshalJSON writes a state answer the way the schema wants it: a VALID
// answer always carries "state" (an empty object when State is nil or
// empty, which omitempty would drop); a STALE one never does.
func (r StateResult) MarshalJSON() ([]byte, error) {
	type plain StateResult // no methods: no recursion
	if r.Status != Valid {
		r.State = nil
		return json.Marshal(plain(r))
	}
	st := r.State
	if st == nil {
		st = map[string]any{}
	}
	return json.Marshal(struct {
		plain
		State map[string]any `json:"state"`
	}{plain(r), st})
}

// Desired returns the request's desired presence, Present unless the
// gcompose member says otherwise.
func (r *Request) Desired() string {
	if r.Gcompose != nil && r.Gcompose.Desired != "" {
		return r.Gcompose.Desired
	}
	return Present
}

// ServeRequest is one line gcompose writes to a served adapter's stdin.
type ServeRequest struct {
	ID     uint64 `json:"id"`
	Call   string `json:"call"`
	Action string `json:"action,omitempty"`
	// Args are the args the one-shot container would have been run with.
	Args []string `json:"args,omitempty"`
	// Stream says gcompose reads interim lines for this call: the adapter
	// may report identity with {id, identity} lines before the response.
	Stream  bool    `json:"stream,omitempty"`
	Request Request `json:"request"`
}

// ServeResponse is one line a served adapter writes to stdout: Result (the
// init or state answer) or Error, and an action's Stdout; or, before those,
// an interim Identity report of a call whose request said Stream.
type ServeResponse struct {
	ID     uint64          `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Stdout string          `json:"stdout,omitempty"`
	// Identity makes the line interim: identifying attributes the action
	// reported while it runs (gcompose persists them at once); the call's
	// response follows later.
	Identity map[string]any `json:"identity,omitempty"`
}

// Interim says whether the line is an interim report, not the response.
func (r *ServeResponse) Interim() bool { return r.Identity != nil }
