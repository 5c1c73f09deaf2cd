// Command sdkadapter is a small adapter written with protocol/sdk, so the
// protocol client is tested against the SDK's one-shot and serve modes: it
// keeps config.content in the file /data/<resource name>. Like a cloud
// adapter it tags what it creates (/data/.tags/<resource name>: app,
// lineage, operation) before creating it, and its sweep finds files of the
// app that no state names. With config.await, an action reports identity
// and then waits until the file /data/<await> exists: a create cancelled
// meanwhile (gcompose went away) rolls back (removes its file, notes it in
// /data/<name>.rolled-back); a delete (which says it started in
// /data/<name>.deleting) goes on to the end. With config.cost (a decimal
// string), it reports that the resource has cost that much (spent, in
// USD), as a third-party adapter billing its own cloud would: gcompose
// cost shows it, and its ledger keeps it after a destroy.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

func main() {
	sdk.Main(sdk.Adapter{
		Init: sdk.Static(protocol.InitResult{
			Plugs:        map[string]protocol.PlugSpec{"data": {ContainerPath: "/data"}},
			ConfigSchema: []byte(`{"type":"object","required":["content"],"properties":{"content":{"type":"string"},"await":{"type":"string"},"cost":{"type":"string"}}}`),
			// Its state answers report what the resource cost (spent).
			Gcompose: &protocol.InitExt{Spend: true},
		}),
		State:   state,
		Actions: map[string]sdk.ActionFunc{"write": write, "delete": remove},
		Sweep:   sweep,
	})
}

type config struct {
	Content string `json:"content"`
	Await   string `json:"await,omitempty"`
	Cost    string `json:"cost,omitempty"`
}

// spent is what a resource with config c reports it cost: nil without a
// cost.
func spent(c config) *protocol.Spent {
	if c.Cost == "" {
		return nil
	}
	return &protocol.Spent{Amount: c.Cost, Currency: "USD", PerHour: "0.01", Covers: "the file's storage", Items: 1}
}

// await waits until /data/<name> exists or ctx is done.
func await(ctx context.Context, name string) error {
	if name == "" {
		return nil
	}
	for {
		if _, err := os.Stat(filepath.Join("/data", name)); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func path(req *sdk.Request) string { return filepath.Join("/data", req.Name) }

func state(ctx context.Context, req *sdk.Request) (*protocol.StateResult, error) {
	got, err := os.ReadFile(path(req))
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var c config
	if err := req.DecodeConfig(&c); err != nil {
		return nil, err
	}
	if req.Desired() == protocol.Absent {
		if !exists {
			return &protocol.StateResult{Status: protocol.Valid}, nil
		}
		return &protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: "delete"}},
			Gcompose: &protocol.StateExt{Change: protocol.ChangeDelete, Spent: spent(c)}}, nil
	}
	if exists && string(got) == c.Content {
		res := &protocol.StateResult{Status: protocol.Valid, State: map[string]any{"content": c.Content}}
		if sp := spent(c); sp != nil {
			res.Gcompose = &protocol.StateExt{Spent: sp}
		}
		return res, nil
	}
	change := protocol.ChangeCreate
	if exists {
		change = protocol.ChangeUpdate
	}
	return &protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: "write"}},
		Gcompose: &protocol.StateExt{Change: change}}, nil
}

func write(ctx context.Context, req *sdk.Request) error {
	var c config
	if err := req.DecodeConfig(&c); err != nil {
		return err
	}
	if op := req.Operation(); op != nil {
		if err := writeTag(req.Name, tag{App: req.App(), Lineage: req.Lineage(), Operation: op.ID}); err != nil {
			return err
		}
	}
	if err := os.WriteFile(path(req), []byte(c.Content), 0o644); err != nil {
		return err
	}
	req.Printf("wrote %s", path(req))
	if err := req.ReportIdentity(map[string]any{"path": path(req)}); err != nil {
		return err
	}
	if err := await(ctx, c.Await); err != nil {
		// Roll back what this create made, on a context of its own: the
		// call's is cancelled, the cleanup must still run (bounded).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return errors.Join(err, rollback(cctx, req))
	}
	return nil
}

func rollback(ctx context.Context, req *sdk.Request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Remove(path(req)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Remove(tagPath(req.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.WriteFile(path(req)+".rolled-back", nil, 0o644)
}

func remove(ctx context.Context, req *sdk.Request) error {
	var c config
	if err := req.DecodeConfig(&c); err != nil {
		return err
	}
	if c.Await != "" {
		if err := os.WriteFile(path(req)+".deleting", nil, 0o644); err != nil {
			return err
		}
	}
	if err := await(ctx, c.Await); err != nil {
		return err
	}
	if err := os.Remove(path(req)); err != nil {
		return err
	}
	if err := os.Remove(tagPath(req.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	req.Printf("deleted %s", path(req))
	return nil
}

// tag is what the adapter records next to each file it creates, as a cloud
// adapter tags a remote object.
type tag struct {
	App       string `json:"app"`
	Lineage   string `json:"lineage"`
	Operation string `json:"operation"`
}

const tagDir = "/data/.tags"

func tagPath(name string) string { return filepath.Join(tagDir, name) }

func writeTag(name string, t tag) error {
	raw, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(tagDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(tagPath(name), raw, 0o644)
}

// sweep reports (or removes, with terminate) every tagged file of this app
// and lineage that no known resource names by identity or pending
// operation; files of another lineage are only reported.
func sweep(ctx context.Context, req *sdk.Request) (*protocol.SweepResult, error) {
	q := req.SweepRequest()
	known, pending := map[string]bool{}, map[string]bool{}
	for _, k := range q.Known {
		if p, ok := k.Identity["path"].(string); ok {
			known[p] = true
		}
		if k.Pending != nil {
			pending[k.Pending.ID] = true
		}
	}
	entries, err := os.ReadDir(tagDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	res := &protocol.SweepResult{}
	for _, e := range entries {
		raw, err := os.ReadFile(tagPath(e.Name()))
		if err != nil {
			return nil, err
		}
		var t tag
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("tag %s: %w", e.Name(), err)
		}
		p := filepath.Join("/data", e.Name())
		if t.App != req.App() || known[p] || pending[t.Operation] {
			continue
		}
		o := protocol.Orphan{Kind: "file", ID: p, Lineage: t.Lineage, Resource: e.Name(), Action: protocol.OrphanReported,
			Detail: "created by operation " + t.Operation}
		if t.Lineage == req.Lineage() && q.Terminate {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
			if err := os.Remove(tagPath(e.Name())); err != nil {
				return nil, err
			}
			o.Action = protocol.OrphanTerminated
		}
		res.Found = append(res.Found, o)
	}
	return res, nil
}
