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
)

// ServeArg is the single argument a served adapter container is started
// with (InitExt.Serve).
const ServeArg = "serve"

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
	Args    []string `json:"args,omitempty"`
	Request Request  `json:"request"`
}

// ServeResponse is one line a served adapter writes to stdout: Result (the
// init or state answer) or Error, and an action's Stdout.
type ServeResponse struct {
	ID     uint64          `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Stdout string          `json:"stdout,omitempty"`
}
