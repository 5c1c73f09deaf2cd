package sdk

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"

	"github.com/gcompose/gcompose/protocol"
)

// Request is one call as the adapter code sees it: the wire request plus
// what the SDK knows about the invocation.
type Request struct {
	protocol.Request
	// Call is protocol.CallInit, CallState, CallAction or CallSweep.
	Call string
	// Action is the action's name on action calls.
	Action string
	// Log writes to stderr (debug lines only when the request is verbose).
	Log *slog.Logger

	out    io.Writer
	report func(map[string]any) error
	// reported merges what the action reported with ReportIdentity: the
	// state the action answers at its end (AnswerState) is asked with it,
	// as gcompose's verifying state call would be.
	reported map[string]any
}

// Out is where an action writes free text for the user (its stdout). In a
// state call it is stderr, since stdout holds only the answer.
func (r *Request) Out() io.Writer { return r.out }

// Printf writes a line of free text to Out.
func (r *Request) Printf(format string, args ...any) {
	fmt.Fprintf(r.out, format+"\n", args...)
}

// ReportIdentity reports identifying attributes of what the action just
// made (an id, a path, an agreement): gcompose persists them at once, while
// the action still runs, so a crash right after still finds what was
// created. One-shot, it prints one protocol.IdentityPrefix line on the
// action's stdout (gcompose reads stdout as it comes; a plain Deployster
// engine shows the line as text); served, it writes an interim line
// {id, identity} at once when gcompose asked for them.
func (r *Request) ReportIdentity(identity map[string]any) error {
	if r.reported == nil {
		r.reported = map[string]any{}
	}
	// Kept as gcompose will hand it back, decoded from JSON (numbers
	// float64, objects map[string]any), for the state the action answers.
	if b, err := json.Marshal(identity); err == nil {
		var back map[string]any
		if json.Unmarshal(b, &back) == nil {
			maps.Copy(r.reported, back)
		}
	}
	if r.report != nil {
		if identity == nil {
			identity = map[string]any{}
		}
		return r.report(identity)
	}
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

// verifyRequest is the state request gcompose's verifying state call would
// send after this action: the same resource and config, desired as the
// action request says, the record as it is now (this action's operation
// still pending, the identity it reported merged in).
func (r *Request) verifyRequest() protocol.Request {
	req := r.Request
	req.StaleState = nil
	ext := *r.Gcompose
	ext.Call, ext.Action, ext.AnswerState, ext.Operation = protocol.CallState, "", false, nil
	p := protocol.Persisted{}
	if ext.Persisted != nil {
		p = *ext.Persisted
	}
	p.Pending = r.Gcompose.Operation
	if len(r.reported) > 0 {
		id := maps.Clone(p.Identity)
		if id == nil {
			id = map[string]any{}
		}
		maps.Copy(id, r.reported)
		p.Identity = id
	}
	ext.Persisted = &p
	req.Gcompose = &ext
	return req
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

// Lineage is the stable ID of the application's state (${app.id}), when
// the engine sent one. Tag what you create with it (with App), so that a
// sweep tells this state's objects from another state's of the same app.
func (r *Request) Lineage() string {
	if r.Gcompose == nil {
		return ""
	}
	return r.Gcompose.Lineage
}

// Operation is, on an action call, the operation gcompose durably recorded
// as pending just before the call (nil from a plain Deployster engine). Its
// ID is the idempotency key: tag what the action creates with it, so that a
// later state call (Persisted().Pending) or sweep finds it after a crash.
func (r *Request) Operation() *protocol.Operation {
	if r.Gcompose == nil {
		return nil
	}
	return r.Gcompose.Operation
}

// Replacing says the state call is plan's question about a resource that
// apply will remove and then create anew (deploy --replace, or its adapter
// image changed; protocol.RequestExt.Replace). Answer as the state call
// after the removal will, which is told nothing of what existed: STALE
// with the create's actions, and in the gcompose member the create's
// Planned outputs (what the config alone decides) and Unknown ones. Only
// those two are read. An adapter that does not look at it answers as for
// any state call, and its outputs stay known after apply.
func (r *Request) Replacing() bool {
	return r.Gcompose != nil && r.Gcompose.Replace
}

// CreateBeforeDestroy says the state call asks that a rebuild create the
// replacement before it removes what exists (the descriptor's
// create_before_destroy: true), which gcompose asks only of an adapter
// whose init answer declares gcompose.create_before_destroy: answer a
// STALE rebuild with the actions in that order.
func (r *Request) CreateBeforeDestroy() bool {
	return r.Gcompose != nil && r.Gcompose.CreateBeforeDestroy
}

// Refreshing says the state call is a refresh's (gcompose refresh, a live
// gcompose cost, a reconciler's check; protocol.RequestExt.Refresh): it
// only reports, nothing is planned or applied after it, so start nothing
// that only a plan or deploy uses.
func (r *Request) Refreshing() bool {
	return r.Gcompose != nil && r.Gcompose.Refresh
}

// CheckMode is, on a check call, the run the check is made for:
// "deploy" (gcompose plan and deploy), "destroy" or "refresh"
// (protocol.RequestExt.Mode); "" on other calls.
func (r *Request) CheckMode() string {
	if r.Gcompose == nil {
		return ""
	}
	return r.Gcompose.Mode
}

// SweepRequest is the sweep call's question (nil on other calls).
func (r *Request) SweepRequest() *protocol.SweepRequest {
	if r.Gcompose == nil {
		return nil
	}
	return r.Gcompose.Sweep
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
