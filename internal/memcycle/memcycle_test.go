package memcycle_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/internal/memcycle"
)

// TestFlatAndLeaking: a cycle that keeps nothing is flat; one that keeps
// 10 KiB a cycle, or a goroutine, is not, and the report says which.
func TestFlatAndLeaking(t *testing.T) {
	var kept [][]byte
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	tests := []struct {
		name  string
		cycle func(context.Context, int) error
		want  string // "" = flat
	}{
		{"flat", func(context.Context, int) error { _ = make([]byte, 10<<10); return nil }, ""},
		{"heap", func(context.Context, int) error { kept = append(kept, make([]byte, 10<<10)); return nil }, "the live heap grew"},
		{"goroutines", func(_ context.Context, i int) error {
			if i%50 == 0 {
				go func() { <-stop }()
			}
			return nil
		}, "goroutines"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := memcycle.Run(context.Background(), memcycle.Options{Cycles: 200, Every: 20}, tt.cycle)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Samples) != 11 || rep.Last().Cycle != 200 {
				t.Fatalf("%d samples, last at %d; want 11, the last at 200", len(rep.Samples), rep.Last().Cycle)
			}
			err = rep.Flat(1024)
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("Flat: %v, want %q (%s)", err, tt.want, rep)
			}
			if tt.name == "heap" && (rep.HeapGrowth() < 9<<10 || rep.HeapGrowth() > 12<<10) {
				t.Errorf("growth %.0f B/cycle, want about 10 KiB", rep.HeapGrowth())
			}
		})
	}
	_ = kept
}

func TestCycleErrorStops(t *testing.T) {
	boom := errors.New("boom")
	_, err := memcycle.Run(context.Background(), memcycle.Options{Cycles: 10}, func(_ context.Context, i int) error {
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "cycle 3") {
		t.Fatalf("err = %v, want cycle 3: boom", err)
	}
}

func TestHeapSeries(t *testing.T) {
	rep := &memcycle.Report{Samples: []memcycle.Sample{{Cycle: 0, HeapLive: 2 << 20}, {Cycle: 100, HeapLive: 2<<20 + 4096}, {Cycle: 200, HeapLive: 3 << 20}}}
	if got, want := rep.HeapSeries(), "2048 2052 3072 KiB at cycles 0, 100, ... 200"; got != want {
		t.Fatalf("HeapSeries() = %q, want %q", got, want)
	}
	if got := (&memcycle.Report{}).HeapSeries(); got != "no samples" {
		t.Fatalf("empty: %q", got)
	}
}
