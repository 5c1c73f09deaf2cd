package sdk

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/gcompose/gcompose/protocol"
)

// Request is one call as the adapter code sees it: the wire request plus
// what the SDK knows about the invocation.
type Request struct {
	protocol.Request
	// Call is protocol.CallInit, CallState or CallAction.
	Call string
	// Action is the action's name on action calls.
	Action string
	// Log writes to stderr (debug lines only when the request is verbose).
	Log *slog.Logger

	out io.Writer
}

// Out is where an action writes free text for the user (its stdout). In a
// state call it is stderr, since stdout holds only the answer.
func (r *Request) Out() io.Writer { return r.out }

// Printf writes a line of free text to Out.
func (r *Request) Printf(format string, args ...any) {
	fmt.Fprintf(r.out, format+"\n", args...)
}

// ReportIdentity reports identifying attributes of what the action just
// made (an id, a path, an agreement): gcompose persists them at once, so a
// crash right after still finds what was created. It prints one
// protocol.IdentityPrefix line on the action's stdout; a plain Deployster
// engine shows it as text.
func (r *Request) ReportIdentity(identity map[string]any) error {
	line, err := protocol.IdentityLine(identity)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(r.out, line); err != nil {
		return fmt.Errorf("report identity: %w", err)
	}
	return nil
}

// Persisted is what gcompose last recorded for the resource (zero when the
// engine sent none: a first deploy, or a plain Deployster engine).
func (r *Request) Persisted() protocol.Persisted {
	if r.Gcompose == nil || r.Gcompose.Persisted == nil {
		return protocol.Persisted{}
	}
	return *r.Gcompose.Persisted
}

// Env returns the value of an environment variable the adapter named in
// its init answer (InitExt.Env). gcompose sends these on stdin only, never
// in the container's environment; ok is false when it sent none.
func (r *Request) Env(name string) (value string, ok bool) {
	if r.Gcompose == nil {
		return "", false
	}
	value, ok = r.Gcompose.Env[name]
	return value, ok
}

// App is the application's name, when the engine sent one.
func (r *Request) App() string {
	if r.Gcompose == nil {
		return ""
	}
	return r.Gcompose.App
}

// DecodeConfig decodes the resource config into v (a pointer to a struct
// with json tags, typically). gcompose has already checked it against the
// init answer's config_schema.
func (r *Request) DecodeConfig(v any) error {
	return decodeVia(r.Config, v, "config")
}

// DecodeStaleState decodes the staleState of the STALE answer that asked for
// this action into v; it leaves v alone when there is none.
func (r *Request) DecodeStaleState(v any) error {
	if len(r.StaleState) == 0 || string(r.StaleState) == "null" {
		return nil
	}
	if err := json.Unmarshal(r.StaleState, v); err != nil {
		return fmt.Errorf("decode staleState: %w", err)
	}
	return nil
}

func decodeVia(from, into any, what string) error {
	raw, err := json.Marshal(from)
	if err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	if string(raw) == "null" {
		raw = []byte("{}")
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	return nil
}

// StaleState encodes v for protocol.StateResult.StaleState.
func StaleState(v any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode staleState: %w", err)
	}
	return raw, nil
}
