// Package memcycle measures whether something that runs in cycles for a
// long time (a reconciler's refresh, logs --follow, a plan repeated) keeps
// its memory flat: it runs a cycle N times and, every so many cycles,
// after a garbage collection, samples the live heap, the goroutines and
// the open file descriptors of the process. Benchmarks report the figures;
// Report.Flat says whether they grew.
//
//	rep, err := memcycle.Run(ctx, memcycle.Options{Cycles: 1000}, func(ctx context.Context, i int) error {
//		return reconciler.Cycle(ctx)
//	})
//	rep.Metrics(b) // heap-growth-B/cycle, goroutine-growth, ...
package memcycle

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"time"
)

// Options of a measurement.
type Options struct {
	// Cycles to run (default 1,000).
	Cycles int
	// Every is how many cycles between two samples (default Cycles/10).
	Every int
	// Warmup cycles run before the first sample, so that caches, pools and
	// lazily started goroutines settle (default Every).
	Warmup int
}

// Sample is the process after some cycles, right after a collection.
type Sample struct {
	Cycle      int
	HeapLive   uint64 // bytes of live heap objects (runtime/metrics /gc/heap/live:bytes)
	Goroutines int
	FDs        int // open file descriptors (-1 where /proc/self/fd is missing)
	At         time.Duration
}

// Report is a measurement.
type Report struct {
	Samples []Sample
}

// Run runs cycle Warmup + Cycles times, sampling after the warmup and then
// every Every cycles. A cycle's error stops the run.
func Run(ctx context.Context, opts Options, cycle func(ctx context.Context, i int) error) (*Report, error) {
	if opts.Cycles <= 0 {
		opts.Cycles = 1000
	}
	if opts.Every <= 0 {
		opts.Every = max(1, opts.Cycles/10)
	}
	if opts.Warmup <= 0 {
		opts.Warmup = opts.Every
	}
	rep := &Report{}
	start := time.Now()
	for i := range opts.Warmup + opts.Cycles {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if i >= opts.Warmup && (i-opts.Warmup)%opts.Every == 0 {
			rep.Samples = append(rep.Samples, sample(i-opts.Warmup, time.Since(start)))
		}
		if err := cycle(ctx, i); err != nil {
			return rep, fmt.Errorf("cycle %d: %w", i, err)
		}
	}
	rep.Samples = append(rep.Samples, sample(opts.Cycles, time.Since(start)))
	return rep, nil
}

func sample(cycle int, at time.Duration) Sample {
	// Two collections: finalizers queued by the first run before the second.
	runtime.GC()
	runtime.GC()
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(m)
	fds := -1
	if entries, err := os.ReadDir("/proc/self/fd"); err == nil {
		fds = len(entries)
	}
	return Sample{Cycle: cycle, HeapLive: m[0].Value.Uint64(), Goroutines: runtime.NumGoroutine(), FDs: fds, At: at}
}

// HeapGrowth is the live heap's growth per cycle from the first to the
// last sample, by a least-squares line through all of them (one noisy
// sample moves it less than a difference of two would).
func (r *Report) HeapGrowth() float64 {
	n := float64(len(r.Samples))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, s := range r.Samples {
		x, y := float64(s.Cycle), float64(s.HeapLive)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// First and Last are the first and last samples.
func (r *Report) First() Sample { return r.Samples[0] }
func (r *Report) Last() Sample  { return r.Samples[len(r.Samples)-1] }

// Flat says why the memory is not flat, or nil: the live heap grew by more
// than maxBytesPerCycle a cycle, or goroutines or file descriptors were
// left behind (more at the end than after the warmup).
func (r *Report) Flat(maxBytesPerCycle float64) error {
	if len(r.Samples) < 2 {
		return fmt.Errorf("%d samples: run more cycles", len(r.Samples))
	}
	var why []string
	if g := r.HeapGrowth(); g > maxBytesPerCycle {
		why = append(why, fmt.Sprintf("the live heap grew %.0f bytes a cycle (%s)", g, r.heapRange()))
	}
	f, l := r.First(), r.Last()
	if l.Goroutines > f.Goroutines {
		why = append(why, fmt.Sprintf("goroutines %d -> %d", f.Goroutines, l.Goroutines))
	}
	if l.FDs > f.FDs {
		why = append(why, fmt.Sprintf("open files %d -> %d", f.FDs, l.FDs))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("not flat over %d cycles: %s", l.Cycle, strings.Join(why, "; "))
}

func (r *Report) heapRange() string {
	return fmt.Sprintf("%s after the warmup, %s after %d cycles", MiB(r.First().HeapLive), MiB(r.Last().HeapLive), r.Last().Cycle)
}

// String is one line: the heap at the first and last sample, the growth
// per cycle, goroutines and files, and the time the cycles took.
func (r *Report) String() string {
	if len(r.Samples) == 0 {
		return "no samples"
	}
	f, l := r.First(), r.Last()
	return fmt.Sprintf("live heap %s, growth %+.0f B/cycle; goroutines %d -> %d; open files %d -> %d; %d cycles in %s (%.2f ms each)",
		r.heapRange(), r.HeapGrowth(), f.Goroutines, l.Goroutines, f.FDs, l.FDs, l.Cycle, (l.At - f.At).Round(time.Millisecond),
		float64((l.At-f.At).Microseconds())/1000/float64(max(1, l.Cycle)))
}

// Metrics reports the figures as benchmark metrics, prefixed with name.
func (r *Report) Metrics(b interface{ ReportMetric(float64, string) }, name string) {
	if len(r.Samples) == 0 {
		return
	}
	f, l := r.First(), r.Last()
	b.ReportMetric(r.HeapGrowth(), name+"heap-growth-B/cycle")
	b.ReportMetric(float64(l.HeapLive)/(1<<20), name+"heap-live-MiB")
	b.ReportMetric(float64(l.Goroutines-f.Goroutines), name+"goroutines-added")
	b.ReportMetric(float64(l.FDs-f.FDs), name+"fds-added")
}

// HeapSeries is the live heap at every sample, in KiB ("1802 1810 ... KiB
// at cycles 0, 100, ... 1000"): whether a growth is a climb or a step
// that settled, which the least-squares figure alone does not say.
func (r *Report) HeapSeries() string {
	if len(r.Samples) == 0 {
		return "no samples"
	}
	kib := make([]string, len(r.Samples))
	for i, s := range r.Samples {
		kib[i] = fmt.Sprintf("%d", s.HeapLive>>10)
	}
	return fmt.Sprintf("%s KiB at cycles %d, %d, ... %d", strings.Join(kib, " "), r.First().Cycle, r.Samples[min(1, len(r.Samples)-1)].Cycle, r.Last().Cycle)
}

// MiB formats a byte count.
func MiB(n uint64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
