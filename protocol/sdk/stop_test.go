package sdk_test

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gcompose/gcompose/protocol/sdk"
)

// TestStopAfterLastCall: Stop runs once when serve's input ends and once
// after a one-shot call, after the calls have answered (an adapter ends
// there what it keeps across calls).
func TestStopAfterLastCall(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
	}{
		{"serve", []string{"serve"}, ""},
		{"one-shot", nil, "{}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stops atomic.Int32
			var out bytes.Buffer
			a := example()
			a.Stop = func(ctx context.Context) {
				if ctx.Err() != nil {
					t.Error("Stop got a cancelled context")
				}
				stops.Add(1)
			}
			var stderr bytes.Buffer
			if code := sdk.Run(t.Context(), a, tc.args, strings.NewReader(tc.stdin), &out, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			if n := stops.Load(); n != 1 {
				t.Errorf("Stop ran %d times, want 1", n)
			}
		})
	}
}
