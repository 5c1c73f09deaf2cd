// Command polllogs is a test adapter for the memory benchmark of `gcompose
// logs --follow`: its VALID state reports, in state.logs, one "poll" entry
// whose stdout is new on every state call and config.bytes long, as a
// long-running command's output tail is (the Golem service adapter keeps
// up to 16 KiB per stream).
package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

type config struct {
	Bytes int `json:"bytes"`
}

func main() {
	var polls atomic.Int64
	sdk.Main(sdk.Adapter{
		Init: sdk.Static(protocol.InitResult{ConfigSchema: []byte(`{"type":"object","properties":{"bytes":{"type":"integer","minimum":1}}}`)}),
		State: func(ctx context.Context, req *sdk.Request) (*protocol.StateResult, error) {
			var c config
			if err := req.DecodeConfig(&c); err != nil {
				return nil, err
			}
			if req.Desired() == protocol.Absent {
				return &protocol.StateResult{Status: protocol.Valid, State: map[string]any{}}, nil
			}
			if req.Persisted().Identity["created"] != true {
				return &protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: "create"}},
					Gcompose: &protocol.StateExt{Change: protocol.ChangeCreate}}, nil
			}
			head := fmt.Sprintf("poll %d\n", polls.Add(1))
			out := head + strings.Repeat("x", max(0, c.Bytes-len(head)-1)) + "\n"
			return &protocol.StateResult{Status: protocol.Valid, State: map[string]any{
				"logs": []any{map[string]any{"source": "poll", "stdout": out}},
			}}, nil
		},
		Actions: map[string]sdk.ActionFunc{
			"create": func(ctx context.Context, req *sdk.Request) error {
				return req.ReportIdentity(map[string]any{"created": true})
			},
		},
	})
}
