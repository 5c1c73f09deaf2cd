// Package protocol holds the wire types of the adapter protocol: Deployster's
// messages, unchanged, plus gcompose's optional extensions, which travel in a
// single "gcompose" member so that a plain Deployster adapter never sees a key
// it does not know (gcompose sends the member only to adapters whose init
// answer carried one). docs/protocol.md is the prose version of this file.
package protocol

import "encoding/json"

// Version is the gcompose protocol version this build speaks.
const Version = 1

// Status values of a state answer.
const (
	Valid = "VALID"
	Stale = "STALE"
)

// Change kinds a STALE answer may declare, so plan can show them.
const (
	ChangeCreate  = "create"
	ChangeUpdate  = "update"
	ChangeRebuild = "rebuild"
	ChangeDelete  = "delete"
)

// Desired says whether the resource must exist (deploy) or be gone (destroy).
const (
	Present = "present"
	Absent  = "absent"
)

// Request is what every call receives on stdin. Init gets the first five
// fields only (Deployster's init has no config).
type Request struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Version    string          `json:"version"`
	Verbose    bool            `json:"verbose"`
	Workspace  string          `json:"workspace"`
	Config     map[string]any  `json:"config,omitempty"`
	StaleState json.RawMessage `json:"staleState,omitempty"`
	Gcompose   *RequestExt     `json:"gcompose,omitempty"`
}

// RequestExt is gcompose's addition to a request.
type RequestExt struct {
	Protocol int    `json:"protocol"`
	App      string `json:"app,omitempty"`
	// Call is "init", "state" or "action".
	Call string `json:"call"`
	// Action names the action being run, on action calls.
	Action string `json:"action,omitempty"`
	// Desired is Present on deploy, Absent on destroy.
	Desired string `json:"desired,omitempty"`
	// Persisted is what gcompose last recorded for the resource, so an
	// adapter can find what it created (GAP-16 identifying attributes).
	Persisted *Persisted `json:"persisted,omitempty"`
	// Env carries the values of the environment variables the adapter asked
	// for in its init answer (InitExt.Env), read from gcompose's own
	// environment. They travel only here, on stdin: never in the container's
	// environment, arguments or labels, never persisted or printed. This is
	// how an adapter gets credentials such as YAGNA_APPKEY.
	Env map[string]string `json:"env,omitempty"`
}

// Persisted is the slice of the state store an adapter sees.
type Persisted struct {
	State    map[string]any `json:"state,omitempty"`
	Identity map[string]any `json:"identity,omitempty"`
	Config   map[string]any `json:"config,omitempty"`
}

// InitResult is the init answer.
type InitResult struct {
	Plugs        map[string]PlugSpec `json:"plugs,omitempty"`
	ConfigSchema json.RawMessage     `json:"config_schema,omitempty"`
	StateAction  ActionSpec          `json:"state_action"`
	Gcompose     *InitExt            `json:"gcompose,omitempty"`
}

// InitExt is what an adapter that knows gcompose adds to its init answer.
type InitExt struct {
	Protocol int `json:"protocol"`
	// Network is the Docker network mode the adapter's containers need:
	// "none" (default), "bridge", "host", or a network name.
	Network string `json:"network,omitempty"`
	// SecretFields are JSON pointers into config whose values are secret.
	SecretFields []string `json:"secret_fields,omitempty"`
	// Serve says the image can run as a long-lived server (see docs).
	Serve bool `json:"serve,omitempty"`
	// Env names environment variables of the gcompose process the adapter
	// needs (e.g. YAGNA_API_URL, YAGNA_APPKEY); their values are sent in
	// RequestExt.Env on every state and action call.
	Env []string `json:"env,omitempty"`
}

// PlugSpec is what an adapter asks to have mounted.
type PlugSpec struct {
	ContainerPath string `json:"container_path"`
	Optional      bool   `json:"optional,omitempty"`
	Writable      *bool  `json:"writable,omitempty"` // default true
}

// IsWritable applies Deployster's default (true).
func (p PlugSpec) IsWritable() bool { return p.Writable == nil || *p.Writable }

// ActionSpec says how to run a container: each field defaults to the
// resource's image, its entrypoint, and no args.
type ActionSpec struct {
	Name        string   `json:"name,omitempty"`
	Description string   `json:"description,omitempty"`
	Image       string   `json:"image,omitempty"`
	Entrypoint  string   `json:"entrypoint,omitempty"`
	Args        []string `json:"args,omitempty"`
}

// StateResult is the state answer: VALID with State, or STALE with Actions.
type StateResult struct {
	Status     string          `json:"status"`
	State      map[string]any  `json:"state,omitempty"`
	StaleState json.RawMessage `json:"staleState,omitempty"`
	Actions    []ActionSpec    `json:"actions,omitempty"`
	Gcompose   *StateExt       `json:"gcompose,omitempty"`
}

// StateExt is what a gcompose-aware adapter adds to a state answer.
type StateExt struct {
	// Change is the kind of change the STALE actions make.
	Change string `json:"change,omitempty"`
	// Forces names the config fields (JSON pointers) that force a rebuild.
	Forces []string `json:"forces,omitempty"`
	// Reason is a one-line human explanation of why the resource is STALE.
	Reason string `json:"reason,omitempty"`
	// Identity are identifying attributes of what exists now.
	Identity map[string]any `json:"identity,omitempty"`
	// Unknown lists state fields (JSON pointers) that will only be known
	// after apply, so plan can show them as such.
	Unknown []string `json:"unknown,omitempty"`
}

// IdentityPrefix starts an action's stdout line that reports identifying
// attributes as a JSON object; gcompose persists them at once. Every other
// line of action stdout is free text, as in Deployster.
const IdentityPrefix = "gcompose:identity "
