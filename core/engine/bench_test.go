package engine

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/memadapter"
)

// wide: n independent resources. deep: a chain of n, each reading the
// previous one's output (the worst case for knock-on resolution).
func shape(kind string, n int) map[string]*plan.Resource {
	out := make(map[string]*plan.Resource, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("resources.r%d", i)
		r := &plan.Resource{Name: name, Type: "mem", Config: map[string]any{"value": fmt.Sprint(i)}}
		if kind == "deep" && i > 0 {
			prev := fmt.Sprintf("resources.r%d", i-1)
			r.DependsOn = []string{prev}
			r.Config["prev"] = "${" + prev + ".state.id}"
		}
		out[name] = r
	}
	return out
}

// BenchmarkEngine is the in-process engine alone (issue 5, benchmark 3): a
// fresh plan+apply and a no-op re-plan of N resources, with an in-memory
// adapter and state store, so only the engine's own cost is measured.
func BenchmarkEngine(b *testing.B) {
	for _, kind := range []string{"wide", "deep"} {
		for _, n := range []int{100, 1000, 10000} {
			b.Run(fmt.Sprintf("%s/n=%d/deploy", kind, n), func(b *testing.B) {
				want := shape(kind, n)
				var peak uint64
				for i := 0; i < b.N; i++ {
					e := &Engine{Adapters: memadapter.New(), Store: state.NewMemoryStore(), Parallelism: 10}
					runtime.GC()
					stop := sampleHeap(&peak)
					if _, err := e.Run(context.Background(), Request{App: "bench", Mode: plan.Deploy, Desired: want}); err != nil {
						b.Fatal(err)
					}
					stop()
				}
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			})
			b.Run(fmt.Sprintf("%s/n=%d/redeploy", kind, n), func(b *testing.B) {
				want := shape(kind, n)
				e := &Engine{Adapters: memadapter.New(), Store: state.NewMemoryStore(), Parallelism: 10}
				if _, err := e.Run(context.Background(), Request{App: "bench", Mode: plan.Deploy, Desired: want}); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					out, err := e.Run(context.Background(), Request{App: "bench", Mode: plan.Deploy, Desired: want})
					if err != nil || out.Plan.HasChanges() {
						b.Fatalf("re-deploy: %v changes=%v", err, out.Plan.HasChanges())
					}
				}
			})
		}
	}
}

// sampleHeap records the peak live heap until stop is called, reading it
// every millisecond through runtime/metrics, which does not stop the world
// (runtime.ReadMemStats in a loop did, and on 2 cores it took a core and
// stalled the engine it measured).
func sampleHeap(peak *uint64) (stop func()) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() {
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); v > *peak {
			*peak = v
		}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-done:
				read()
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}
