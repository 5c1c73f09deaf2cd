// Package protocol holds the wire types of the adapter protocol: Deployster's
// messages, unchanged, plus gcompose's optional extensions, which travel in a
// single "gcompose" member so that a plain Deployster adapter never sees a key
// it does not know (gcompose sends the member only to adapters whose init
// answer carried one). docs/protocol.md is the prose version of this file.
package protocol

import (
	"encoding/json"
	"slices"
	"time"
)

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
	// Call is "init", "state", "action" or "sweep".
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
	// Lineage is the stable ID of this application's state (${app.id}):
	// an adapter tags what it creates with it, so that a sweep tells this
	// state's objects from another's of the same app name.
	Lineage string `json:"lineage,omitempty"`
	// Operation is, on action calls, the operation gcompose durably
	// recorded as pending just before the call: its ID is the idempotency
	// key an adapter tags what it creates with.
	Operation *Operation `json:"operation,omitempty"`
	// Sweep is the sweep call's question (Call "sweep").
	Sweep *SweepRequest `json:"sweep,omitempty"`
	// Estimate marks a state call made only for StateExt.Cost: the
	// config may still hold ${...} references known after apply, and the
	// answer's status and actions are ignored (InitExt.Estimate).
	Estimate bool `json:"estimate,omitempty"`
	// AnswerState, on the last action call of a STALE answer to an
	// adapter that declared InitExt.ActionState, asks the action to end
	// with the answer the verifying state call would give (a StatePrefix
	// line); Desired then says which state call that is. gcompose asks the
	// state call itself when the action does not answer.
	AnswerState bool `json:"answer_state,omitempty"`
	// PlannedCost is, on action calls, the cost the approved plan showed
	// for the resource (its adapter's StateExt.Cost, Hint included): an
	// action may use it to decide sooner, and says so when it ends up
	// dearer than planned.
	PlannedCost *Cost `json:"planned_cost,omitempty"`
	// Replace marks a state call made by plan only, for a resource that
	// apply will remove and then create anew (deploy --replace, or its
	// adapter image changed): answer as the state call after the removal
	// will (it carries no Persisted, nor does this one), typically STALE
	// create, with the StateExt.Planned and Unknown of that create. Only
	// those two are read; status and actions are ignored, and an adapter
	// that ignores the member leaves its outputs known after apply.
	Replace bool `json:"replace,omitempty"`
	// CreateBeforeDestroy, on state calls to an adapter that declared it
	// (InitExt.CreateBeforeDestroy), asks that a rebuild create the
	// replacement before it removes what exists (the descriptor's
	// create_before_destroy: true): the STALE answer's actions in that order.
	CreateBeforeDestroy bool `json:"create_before_destroy,omitempty"`
	// Refresh marks the state calls of a refresh (gcompose refresh, a live
	// gcompose cost, a reconciler's check): they only report, and nothing
	// is planned or applied after them. Answer as to any state call, but
	// start nothing that only a plan or deploy uses (the Golem payments
	// adapter does not start the market watcher for it).
	Refresh bool `json:"refresh,omitempty"`
	// Mode is, on check calls, the run the check is made for: "deploy"
	// (gcompose plan and deploy, which may rent and estimate), "destroy" or
	// "refresh" (gcompose refresh, a live cost, a reconciler's check).
	// Start nothing for a destroy or a refresh that only a plan or deploy
	// uses (the Golem payments check launches the market watcher only for
	// "deploy").
	Mode string `json:"mode,omitempty"`
}

// Persisted is the slice of the state store an adapter sees.
type Persisted struct {
	State    map[string]any `json:"state,omitempty"`
	Identity map[string]any `json:"identity,omitempty"`
	Config   map[string]any `json:"config,omitempty"`
	// Pending is an operation recorded on the resource but never completed
	// (a killed or interrupted run, or the actions of this run that the
	// state call verifies): the adapter should look for objects tagged with
	// its ID and adopt them (report them in StateExt.Identity) or remove
	// them.
	Pending *Operation `json:"pending,omitempty"`
}

// Operation is a pending operation gcompose durably recorded before a call.
// ID is the idempotency key: an adapter tags what it creates with it (where
// the remote API allows) so that a later call finds it.
type Operation struct {
	ID string `json:"id"`
	// Kind is ChangeCreate, ChangeUpdate, ChangeRebuild or ChangeDelete.
	Kind string `json:"kind"`
	// Action is the action's name.
	Action    string    `json:"action,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

// SweepRequest is the question of a sweep call: find what this adapter made
// for the application that no state names, and terminate it (or only
// report it).
type SweepRequest struct {
	// Known are every resource of this adapter type in the app's state.
	Known []KnownResource `json:"known"`
	// Terminate is false for a dry run: report only.
	Terminate bool `json:"terminate"`
	// Only, with Terminate, lists the IDs of the orphans to terminate:
	// those the approved plan deletes as leftovers. Others found are
	// reported, not terminated. Empty: every orphan (the rules).
	Only []string `json:"only,omitempty"`
}

// Terminates says whether the sweep is to terminate the orphan id (one of
// this state's lineage): a sweep asked to terminate, and id among Only
// when Only is given. Everything else found is only reported.
func (q *SweepRequest) Terminates(id string) bool {
	return q != nil && q.Terminate && (len(q.Only) == 0 || slices.Contains(q.Only, id))
}

// KnownResource is one resource of the state, as a sweep sees it.
type KnownResource struct {
	Name     string         `json:"name"`
	Identity map[string]any `json:"identity,omitempty"`
	Pending  *Operation     `json:"pending,omitempty"`
}

// SweepResult is the sweep answer.
type SweepResult struct {
	Found []Orphan `json:"found"`
}

// Orphan actions.
const (
	OrphanTerminated = "terminated"
	OrphanReported   = "reported"
)

// Orphan is one object a sweep found that no state names.
type Orphan struct {
	// Kind of object: "agreement", "activity", "allocation", "container", ...
	Kind string `json:"kind"`
	ID   string `json:"id"`
	// Lineage is the state lineage the object is tagged with, when known.
	Lineage string `json:"lineage,omitempty"`
	// Resource is the resource it was made for, when known.
	Resource string `json:"resource,omitempty"`
	// Action is OrphanTerminated or OrphanReported.
	Action string `json:"action"`
	// Detail is one line for people ("provider p-3, created 12:01:03 by
	// operation 8f2…").
	Detail string `json:"detail,omitempty"`
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
	// Sweep says the adapter answers sweep calls (see SweepRequest).
	Sweep bool `json:"sweep,omitempty"`
	// EnvRequired names the variables of Env the adapter cannot work
	// without: gcompose refuses to plan when one is not set, in one line
	// naming it, rather than running every resource's calls into the
	// adapter's error.
	EnvRequired []string `json:"env_required,omitempty"`
	// Check says the adapter answers check calls (CheckResult): before
	// planning, gcompose asks each such adapter type once whether it can
	// work at all (an API reachable, its credentials accepted).
	Check bool `json:"check,omitempty"`
	// Estimate says the adapter's state call can estimate the cost of a
	// resource whose config is only known after apply (RequestExt.Estimate),
	// so a first plan shows what it will cost.
	Estimate bool `json:"estimate,omitempty"`
	// Summary says which outputs gcompose shows for the adapter's
	// resources: the endpoints printed after a deploy and the columns of
	// gcompose ps.
	Summary *Summary `json:"summary,omitempty"`
	// Outputs is a JSON Schema of the resource's outputs (the VALID
	// answer's state). The top-level properties it lists are the outputs
	// others may reference: gcompose refuses a reference to any other at
	// plan time, before the resource exists.
	Outputs map[string]any `json:"outputs,omitempty"`
	// CreateBeforeDestroy says the adapter can, when a state call asks
	// (RequestExt.CreateBeforeDestroy), plan a rebuild that creates the
	// replacement before it removes what exists.
	CreateBeforeDestroy bool `json:"create_before_destroy,omitempty"`
	// ActionState says the adapter's last action can end with the
	// resource's state as the verifying state call would answer it
	// (RequestExt.AnswerState, StatePrefix), which saves that call.
	ActionState bool `json:"action_state,omitempty"`
	// Spend says the adapter's state answers report what the resource has
	// cost so far (StateExt.Spent). gcompose reads spent only from an
	// adapter that declared it: gcompose cost and the reconciler's budget
	// sum what such adapters report.
	Spend bool `json:"spend,omitempty"`
}

// CheckResult is the check answer: OK, or the Problem in one line for
// people ("yagna at http://127.0.0.1:7465 refused the app key (401)").
type CheckResult struct {
	OK      bool   `json:"ok"`
	Problem string `json:"problem,omitempty"`
}

// Summary names outputs people look for, each as a JSON pointer into a
// resource's outputs (its VALID state). An output that is missing or not a
// string or number is left blank.
type Summary struct {
	// URL is what a person opens: printed after a deploy as an endpoint.
	URL string `json:"url,omitempty"`
	// For points at an output holding the address of the resource the URL
	// serves, when that is another one (a proxy in front of a service).
	For string `json:"for,omitempty"`
	// IP is the resource's address.
	IP string `json:"ip,omitempty"`
	// Provider is who runs it.
	Provider string `json:"provider,omitempty"`
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
	// Planned are state fields a STALE answer's actions will leave known
	// now, by JSON pointer into the VALID state (Terraform's planned
	// values): {"/network_node/ip": "192.168.77.2"}. Dependents that read
	// them are planned with these values; apply holds the adapter to them.
	Planned map[string]any `json:"planned,omitempty"`
	// Cost is what the resource costs to run, shown by plan.
	Cost *Cost `json:"cost,omitempty"`
	// Refuse says the change the resource needs cannot succeed (a VALID
	// or STALE answer): plan fails the resource with the message, and
	// deploy refuses before any action. Plain Deployster adapters cannot
	// say it.
	Refuse *Refusal `json:"refuse,omitempty"`
	// Spent is what the resource has cost so far, for an adapter that
	// declared InitExt.Spend: gcompose records it with the resource (and
	// keeps it in the state's ledger once the resource is removed).
	Spent *Spent `json:"spent,omitempty"`
}

// Spent is what a resource has cost so far, as its adapter knows it (for
// Golem: the debit notes and invoices accepted for its agreements).
// Amounts are decimal strings ("0.000125"), exact in any currency.
type Spent struct {
	// Amount is what was paid or accepted for payment so far.
	Amount string `json:"amount"`
	// Currency of every amount ("GLM", "USD").
	Currency string `json:"currency"`
	// Due is what was asked and not accepted yet (a provider's latest
	// debit note), beyond Amount.
	Due string `json:"due,omitempty"`
	// PerHour is the rate of what runs now, "" when nothing runs.
	PerHour string `json:"per_hour,omitempty"`
	// Covers says what the amounts count, in one line for people ("3
	// agreements: accepted invoices, else the last accepted debit notes").
	Covers string `json:"covers,omitempty"`
	// Items counts the separately billed things behind the amounts (a
	// Golem service's agreements: the current one and those it replaced).
	Items int `json:"items,omitempty"`
}

// Refusal is an adapter's "this cannot succeed", in one line for people
// ("no offer within the caps: the cheapest asks 0.2 GLM/h, max_price_per_hour is 0.1").
type Refusal struct {
	Message string `json:"message"`
}

// Cost is an adapter's estimate of what a resource costs to run (before it
// exists), or what was agreed (after).
type Cost struct {
	Currency string  `json:"currency"`
	PerHour  float64 `json:"per_hour"`
	Start    float64 `json:"start,omitempty"`
	// Hours is the period Total covers (a Golem agreement's expiration).
	Hours float64 `json:"hours,omitempty"`
	Total float64 `json:"total"`
	// Basis: CostMarket, CostCaps or CostAgreed.
	Basis string `json:"basis"`
	Note  string `json:"note,omitempty"`
	// Hint is what the estimate was made from, for the adapter alone:
	// gcompose keeps it in the plan and hands it back on the resource's
	// action calls (RequestExt.PlannedCost), never reading it.
	Hint json.RawMessage `json:"hint,omitempty"`
}

// Cost bases.
const (
	CostMarket = "market" // the cheapest offer within the caps at plan time
	CostCaps   = "caps"   // the most the caps let an offer charge
	CostAgreed = "agreed" // the price agreed
)

// IdentityPrefix starts an action's stdout line that reports identifying
// attributes as a JSON object; gcompose persists them at once. Every other
// line of action stdout is free text, as in Deployster.
const IdentityPrefix = "gcompose:identity "

// StatePrefix starts the action stdout line that answers a request's
// AnswerState: the prefix, then the state answer (StateResult) as compact
// JSON on the same line.
const StatePrefix = "gcompose:state "
