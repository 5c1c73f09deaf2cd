package adapter_test

import (
	"context"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/internal/testimage"
	"github.com/gcompose/gcompose/protocol"
)

// benchState measures one state call (init cached) in each mode, sequential
// and with 10 in flight.
func benchState(b *testing.B, name string, noServe bool, parallel bool) {
	testimage.RequireDocker(b)
	ctx := context.Background()
	image := testimage.Image(b, ctx, adapterPkg, adapterName)
	r, err := runner.New(ctx, runner.Options{Labels: testimage.Labels(b), Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	c, err := adapter.New(adapter.Options{Runner: r, NoServe: noServe})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	tg := adapter.Target{App: "bench", Name: name, Image: image, Config: map[string]any{"mode": "echo"}}
	if _, err := c.State(ctx, tg, protocol.Present, nil); err != nil { // init, server start
		b.Fatal(err)
	}
	b.ResetTimer()
	if parallel {
		b.SetParallelism(5) // 2 cores x 5 = 10 in flight
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.State(ctx, tg, protocol.Present, nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		for i := 0; i < b.N; i++ {
			if _, err := c.State(ctx, tg, protocol.Present, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/call")
}

func BenchmarkStateOneShot(b *testing.B)         { benchState(b, "bench.oneshot", true, false) }
func BenchmarkStateOneShotParallel(b *testing.B) { benchState(b, "bench.oneshot", true, true) }
func BenchmarkStateServed(b *testing.B)          { benchState(b, "bench.serve", false, false) }
func BenchmarkStateServedParallel(b *testing.B)  { benchState(b, "bench.serve", false, true) }
