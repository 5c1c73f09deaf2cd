// Package state persists what gcompose deployed: one versioned JSON Document
// per application, holding every resource's last applied config, its outputs
// (the adapter's VALID state), its identifying attributes and any operation
// that was in flight when the process stopped.
//
// Backends implement Store: the file backend (the default, a state directory
// with a document, an append-only journal, a backup and a lock file per
// application), an in-memory backend for fast unit tests, and etcd (package
// core/state/etcd, opened by core/stateurl). Every write goes through a Lock and is refused once that lock is
// no longer held (fencing). docs/state.md is the prose version of this
// package.
package state

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"
)

// FormatVersion is the version of the document format this build writes.
// Load refuses documents with a higher version.
const FormatVersion = 1

// Status is a resource's GAP-16 lifecycle state.
type Status string

// GAP-16 resource states.
const (
	// StatusPending: known to gcompose but not (yet, or not completely)
	// created; e.g. a create action was started and did not finish.
	StatusPending Status = "Pending"
	// StatusActive: created and VALID after its last action.
	StatusActive Status = "Active"
	// StatusTerminated: removed (by destroy) or found gone.
	StatusTerminated Status = "Terminated"
)

// OpKind is the kind of change a mutating action makes.
type OpKind string

// Operation kinds; the same words as protocol.Change*.
const (
	OpCreate  OpKind = "create"
	OpUpdate  OpKind = "update"
	OpRebuild OpKind = "rebuild"
	OpDelete  OpKind = "delete"
)

// Document is the persisted state of one application.
type Document struct {
	// FormatVersion of this document (FormatVersion when written by this build).
	FormatVersion int `json:"format_version"`
	// Lineage identifies one application's history: created with the first
	// durable write and never changed afterwards. Two documents with
	// different lineages describe different deployments; state push refuses
	// to mix them unless forced.
	Lineage string `json:"lineage"`
	// Serial increments on every durable write (each Apply, each Replace).
	// Compaction does not change it: it rewrites the same content.
	Serial uint64 `json:"serial"`
	// App is the application's name.
	App       string    `json:"app"`
	UpdatedAt time.Time `json:"updated_at"`
	// Resources by name (the resolved node address, e.g. "db" or "web[1]").
	Resources map[string]*Resource `json:"resources"`
	// Ledger is what the resources gcompose no longer manages had cost
	// when they were removed (destroyed, rebuilt anew, forgotten): their
	// adapters' last Spent, kept so that what the application spent
	// outlives a destroy. Oldest first.
	Ledger []Ended `json:"ledger,omitempty"`
}

// Spent is what a resource has cost so far, as its adapter last reported it
// (protocol.Spent, for adapters that declared spend): amounts are decimal
// strings in Currency.
type Spent struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
	Due      string `json:"due,omitempty"`
	PerHour  string `json:"per_hour,omitempty"`
	Covers   string `json:"covers,omitempty"`
	Items    int    `json:"items,omitempty"`
	// At is when the adapter reported it.
	At time.Time `json:"at"`
}

// Ended is one entry of the ledger: a removed resource and what it had
// cost.
type Ended struct {
	Resource string    `json:"resource"`
	Type     string    `json:"type,omitempty"`
	Spent    Spent     `json:"spent"`
	EndedAt  time.Time `json:"ended_at"`
}

// Resource is what gcompose knows about one deployed resource.
type Resource struct {
	Name string `json:"name"`
	// AdapterName is the name its adapter receives (address.AdapterName
	// when it was created). Empty in states written before gcompose sent
	// the descriptor's name: such a resource keeps receiving Name, the name
	// its adapter made its objects under (see CalledAs).
	AdapterName string `json:"adapter_name,omitempty"`
	// Type is the adapter image reference the resource is managed with.
	Type string `json:"type"`
	// ImageID is the image ID that reference resolved to when last applied.
	ImageID string `json:"image_id,omitempty"`
	Status  Status `json:"status"`
	// Config is the resolved config last applied (references substituted).
	Config map[string]any `json:"config,omitempty"`
	// State is the adapter's last VALID state: the resource's outputs.
	State map[string]any `json:"state,omitempty"`
	// Identity holds identifying attributes (agreement id, container id,
	// path, ...) as soon as an action reports them, so that a resource
	// whose action was interrupted can still be found.
	Identity map[string]any `json:"identity,omitempty"`
	// Dependencies are the names of resources this one depends on, so that
	// destroy can order removal without the descriptor.
	Dependencies []string `json:"dependencies,omitempty"`
	// Pending is the mutating operation in flight: recorded before the
	// action starts, cleared when it finished. Found set on load, it means
	// the process stopped during that action: recovery asks the adapter's
	// state call what really exists.
	Pending   *Operation `json:"pending,omitempty"`
	UpdatedAt time.Time  `json:"updated_at"`
	// CreatedAt is when the thing was last created (or rebuilt): the age
	// gcompose ps shows. Zero in states written before it was recorded.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Spent is what the resource had cost when gcompose last recorded its
	// adapter's answer (adapters that report spend only).
	Spent *Spent `json:"spent,omitempty"`
}

// CalledAs is the name r's adapter receives: the one recorded, else (a
// state from before names were recorded) its address, which older
// gcompose sent and its adapter may have named objects after.
func (r *Resource) CalledAs() string {
	if r.AdapterName != "" {
		return r.AdapterName
	}
	return r.Name
}

// Operation is a mutating action in flight on a resource.
type Operation struct {
	// ID is unique per operation (NewID).
	ID   string `json:"id"`
	Kind OpKind `json:"kind"`
	// Action is the adapter action's name (ActionSpec.Name), if any.
	Action    string    `json:"action,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// Holder is the lock holder that started it (LockInfo.Holder).
	Holder string `json:"holder,omitempty"`
	// LockID is the lock under which it was started.
	LockID string `json:"lock_id,omitempty"`
	// Failed is set when the action ended with an error (the adapter
	// failed, or its call could not be made) rather than being cut short:
	// what it did is as unknown as an interrupted action's, and the next
	// run resolves it the same way, but says that it failed, and why.
	Failed   string     `json:"failed,omitempty"`
	FailedAt *time.Time `json:"failed_at,omitempty"`
}

// Describe is the operation in a few words: "interrupted create" or
// "failed create".
func (o *Operation) Describe() string {
	if o.Failed != "" {
		return "failed " + string(o.Kind)
	}
	return "interrupted " + string(o.Kind)
}

// NewOperation returns the operation to record as a resource's Pending
// before starting a mutating action under lock l.
func NewOperation(kind OpKind, action string, l *Lock) *Operation {
	op := &Operation{ID: NewID(), Kind: kind, Action: action, StartedAt: time.Now().UTC()}
	if l != nil {
		op.Holder = l.Info.Holder
		op.LockID = l.Info.ID
	}
	return op
}

// NewDocument returns an empty document for app, without a lineage: the
// lineage is assigned by the first durable write.
func NewDocument(app string) *Document {
	return &Document{FormatVersion: FormatVersion, App: app, Resources: map[string]*Resource{}}
}

// Clone returns a deep copy of d.
func (d *Document) Clone() *Document {
	if d == nil {
		return nil
	}
	c := *d
	c.Ledger = slices.Clone(d.Ledger)
	c.Resources = make(map[string]*Resource, len(d.Resources))
	for k, r := range d.Resources {
		c.Resources[k] = r.Clone()
	}
	return &c
}

// Names returns the resource names in sorted order.
func (d *Document) Names() []string {
	names := make([]string, 0, len(d.Resources))
	for n := range d.Resources {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// PendingResources returns the resources with an operation in flight, by name.
func (d *Document) PendingResources() []*Resource {
	var out []*Resource
	for _, n := range d.Names() {
		if r := d.Resources[n]; r.Pending != nil {
			out = append(out, r)
		}
	}
	return out
}

// apply applies changes to d in place (the caller owns d and the changes'
// resources, already cloned).
func (d *Document) apply(changes []Change, now time.Time) {
	if d.Resources == nil {
		d.Resources = map[string]*Resource{}
	}
	for _, ch := range changes {
		if ch.Put != nil {
			d.Resources[ch.Put.Name] = ch.Put
		} else {
			typ := ""
			if old := d.Resources[ch.Delete]; old != nil {
				typ = old.Type
			}
			if e := ch.Ended(typ, now); e != nil {
				d.Ledger = append(d.Ledger, *e)
			}
			delete(d.Resources, ch.Delete)
		}
	}
	d.UpdatedAt = now
}

// Clone returns a deep copy of r.
func (r *Resource) Clone() *Resource {
	if r == nil {
		return nil
	}
	c := *r
	c.Config = CloneMap(r.Config)
	c.State = CloneMap(r.State)
	c.Identity = CloneMap(r.Identity)
	if r.Dependencies != nil {
		c.Dependencies = append([]string(nil), r.Dependencies...)
	}
	if r.Spent != nil {
		sp := *r.Spent
		c.Spent = &sp
	}
	if r.Pending != nil {
		p := *r.Pending
		if p.FailedAt != nil {
			at := *p.FailedAt
			p.FailedAt = &at
		}
		c.Pending = &p
	}
	return &c
}

// CloneMap deep-copies a JSON-like map (nested maps and slices are copied;
// other values are shared, which is safe for JSON scalars).
func CloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = cloneValue(v)
	}
	return c
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return CloneMap(x)
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = cloneValue(e)
		}
		return c
	case []string:
		return append([]string(nil), x...)
	case map[string]string:
		return maps.Clone(x)
	default:
		return v
	}
}

// Change is one durable modification of a document: put (create or replace)
// a resource, or delete one. Build it with Put or Delete.
type Change struct {
	Put    *Resource `json:"put,omitempty"`
	Delete string    `json:"delete,omitempty"`
	// Spent, on a delete, is what the resource had cost when it was
	// removed (its adapter's last answer, else what the state recorded):
	// the ledger keeps it. The delete carries it, so that a backend that
	// stores resources apart (etcd) need not read the resource.
	Spent *Spent `json:"spent,omitempty"`
}

// Ended is the ledger entry a delete makes, nil when it carries no
// spend. typ is the removed resource's type, when known.
func (ch Change) Ended(typ string, now time.Time) *Ended {
	if ch.Spent == nil {
		return nil
	}
	return &Ended{Resource: ch.Delete, Type: typ, Spent: *ch.Spent, EndedAt: now}
}

// Put returns a change that stores r (replacing any resource of that name).
func Put(r *Resource) Change { return Change{Put: r} }

// Delete returns a change that removes the resource name.
func Delete(name string) Change { return Change{Delete: name} }

// DeleteSpent returns a change that removes the resource name and keeps
// what it had cost, sp, in the ledger (nil: nothing is kept).
func DeleteSpent(name string, sp *Spent) Change { return Change{Delete: name, Spent: sp} }

// PrepareChanges validates changes and returns deep copies, puts stamped
// with now: the one rule every backend (file, memory, etcd) applies before
// it writes.
func PrepareChanges(changes []Change, now time.Time) ([]Change, error) {
	out := make([]Change, len(changes))
	for i, ch := range changes {
		switch {
		case ch.Put != nil && ch.Delete != "":
			return nil, fmt.Errorf("change %d: both put %q and delete %q", i, ch.Put.Name, ch.Delete)
		case ch.Put != nil:
			if ch.Put.Name == "" {
				return nil, fmt.Errorf("change %d: put of a resource without a name", i)
			}
			r := ch.Put.Clone()
			r.UpdatedAt = now
			out[i] = Change{Put: r}
		case ch.Put == nil && ch.Spent != nil && ch.Delete == "":
			return nil, fmt.Errorf("change %d: spent without a delete", i)
		case ch.Delete != "":
			out[i] = ch
			if ch.Spent != nil {
				sp := *ch.Spent
				out[i].Spent = &sp
			}
		default:
			return nil, fmt.Errorf("change %d: empty (neither put nor delete)", i)
		}
	}
	return out, nil
}

// NewID returns a random 128-bit identifier formatted like a UUID (version 4).
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand.Read never fails on supported platforms.
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
