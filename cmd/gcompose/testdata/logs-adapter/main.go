// Command logs-adapter is a test adapter that reports command output in its
// VALID state (state.logs, docs/protocol.md "Command output"): the output
// of the "init" command its create action ran, and one "poll" entry that
// changes on every state call, so that `gcompose logs -f` has something new
// to show.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

type config struct {
	Message string `json:"message"`
}

func main() {
	sdk.Main(sdk.Adapter{
		Init:  sdk.Static(protocol.InitResult{}),
		State: state,
		Actions: map[string]sdk.ActionFunc{
			"create": func(ctx context.Context, req *sdk.Request) error {
				var c config
				if err := req.DecodeConfig(&c); err != nil {
					return err
				}
				req.Printf("ran echo %s", c.Message)
				return req.ReportIdentity(map[string]any{"created": true})
			},
		},
	})
}

func state(ctx context.Context, req *sdk.Request) (*protocol.StateResult, error) {
	var c config
	if err := req.DecodeConfig(&c); err != nil {
		return nil, err
	}
	if req.Desired() == protocol.Absent {
		return &protocol.StateResult{Status: protocol.Valid, State: map[string]any{}}, nil
	}
	if req.Persisted().Identity["created"] != true {
		return &protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: "create", Description: "run init"}},
			Gcompose: &protocol.StateExt{Change: protocol.ChangeCreate}}, nil
	}
	return &protocol.StateResult{Status: protocol.Valid, State: map[string]any{
		"message": c.Message,
		"logs": []any{
			map[string]any{"source": "init[0]", "command": "echo " + c.Message, "stdout": c.Message + "\n", "exit_code": 0},
			map[string]any{"source": "poll", "stdout": fmt.Sprintf("polled at %d\n", time.Now().UnixNano())},
		},
	}}, nil
}
