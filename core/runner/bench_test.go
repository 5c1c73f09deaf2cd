package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/internal/testimage"
)

// BenchmarkRunOneCall measures one complete adapter call: create, attach,
// start, a JSON round trip over stdin/stdout, wait, remove.
func BenchmarkRunOneCall(b *testing.B) {
	testimage.RequireDocker(b)
	ctx := context.Background()
	_, img := adapterImage(b, ctx)
	r, err := runner.New(ctx, runner.Options{Labels: testimage.Labels(b), Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	s := runner.Spec{Image: img, Args: []string{"echo"}, Stdin: []byte(`{"name":"bench"}`), App: "bench", Resource: "bench", Call: "state"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.Run(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/call")
}
