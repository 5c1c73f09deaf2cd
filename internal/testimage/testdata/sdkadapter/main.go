// Command sdkadapter is a small adapter written with protocol/sdk, so the
// protocol client is tested against the SDK's one-shot and serve modes: it
// keeps config.content in the file /data/<resource name>.
package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

func main() {
	sdk.Main(sdk.Adapter{
		Init: sdk.Static(protocol.InitResult{
			Plugs:        map[string]protocol.PlugSpec{"data": {ContainerPath: "/data"}},
			ConfigSchema: []byte(`{"type":"object","required":["content"],"properties":{"content":{"type":"string"}}}`),
		}),
		State:   state,
		Actions: map[string]sdk.ActionFunc{"write": write, "delete": remove},
	})
}

type config struct {
	Content string `json:"content"`
}

func path(req *sdk.Request) string { return filepath.Join("/data", req.Name) }

func state(ctx context.Context, req *sdk.Request) (*protocol.StateResult, error) {
	got, err := os.ReadFile(path(req))
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if req.Desired() == protocol.Absent {
		if !exists {
			return &protocol.StateResult{Status: protocol.Valid}, nil
		}
		return &protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: "delete"}},
			Gcompose: &protocol.StateExt{Change: protocol.ChangeDelete}}, nil
	}
	var c config
	if err := req.DecodeConfig(&c); err != nil {
		return nil, err
	}
	if exists && string(got) == c.Content {
		return &protocol.StateResult{Status: protocol.Valid, State: map[string]any{"content": c.Content}}, nil
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
	if err := os.WriteFile(path(req), []byte(c.Content), 0o644); err != nil {
		return err
	}
	req.Printf("wrote %s", path(req))
	return req.ReportIdentity(map[string]any{"path": path(req)})
}

func remove(ctx context.Context, req *sdk.Request) error {
	if err := os.Remove(path(req)); err != nil {
		return err
	}
	req.Printf("deleted %s", path(req))
	return nil
}
