package sdk_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// BenchmarkServeStateCall measures the SDK's side of one served state call:
// a request line in, a validated answer line out (no container).
func BenchmarkServeStateCall(b *testing.B) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- sdk.Run(context.Background(), example(), []string{"serve"}, inR, outW, io.Discard)
		outW.Close()
	}()
	req := protocol.Request{Name: "r", Type: "t", Version: "1", Workspace: "/w", Config: map[string]any{"want": "have"}}
	sc := bufio.NewScanner(outR)
	enc := json.NewEncoder(inW)
	var id uint64
	for b.Loop() {
		id++
		if err := enc.Encode(protocol.ServeRequest{ID: id, Call: protocol.CallState, Request: req}); err != nil {
			b.Fatal(err)
		}
		if !sc.Scan() {
			b.Fatal("server ended")
		}
		var r protocol.ServeResponse
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.ID != id || r.Error != "" {
			b.Fatal(fmt.Sprint(err, r))
		}
	}
	inW.Close()
	if code := <-done; code != 0 {
		b.Fatalf("serve exited %d", code)
	}
}
