package reconcile

import (
	"context"
	"testing"

	"github.com/gcompose/gcompose/core/state"
)

// BenchmarkHealthyCycle runs b.N cycles of a healthy application in
// process (the real engine and planner, the in-memory store, the world's
// adapters): what a reconciler does every interval, for measuring its time
// and allocations per cycle over many cycles (go test -bench HealthyCycle
// -benchtime 1000x -benchmem).
func BenchmarkHealthyCycle(b *testing.B) {
	bd := newBed(b, state.NewMemoryStore())
	r := bd.reconciler(Config{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := r.Cycle(ctx, ctx); res.Outcome != Healthy {
			b.Fatalf("cycle: %+v", res)
		}
	}
}

// BenchmarkRepairCycle runs b.N cycles that each find db dead and repair
// it with its knock-on.
func BenchmarkRepairCycle(b *testing.B) {
	bd := newBed(b, state.NewMemoryStore())
	r := bd.reconciler(Config{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		bd.w.kill(b, "resources.db")
		if res := r.Cycle(ctx, ctx); res.Outcome != Repaired {
			b.Fatalf("cycle: %+v", res)
		}
	}
}
