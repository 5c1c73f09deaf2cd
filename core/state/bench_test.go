package state_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/statetest"
)

// benchResource is about the size of a real resource (~450 bytes of JSON).
func benchResource(i int) *state.Resource {
	r := statetest.Res(fmt.Sprintf("svc-%05d", i), i)
	r.State["ip"] = fmt.Sprintf("192.168.%d.%d", i/250, i%250)
	r.State["url"] = fmt.Sprintf("http://svc-%05d.example:8080/", i)
	return r
}

func quiet() state.Options {
	return state.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// BenchmarkFileApplyCompact: one run that persists after every action (N
// puts through Apply, one fsynced journal line each), then compacts. The
// cost per resource stays flat from 1,000 to 10,000: linear, not quadratic.
func BenchmarkFileApplyCompact(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			ctx := context.Background()
			var written int64
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				s, err := state.NewFileStore(dir, quiet())
				if err != nil {
					b.Fatal(err)
				}
				res := make([]*state.Resource, n)
				for i := range res {
					res[i] = benchResource(i)
				}
				b.StartTimer()
				l, err := s.Lock(ctx, "app", state.NewLockInfo("deploy", "bench"))
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					if err := s.Apply(ctx, l, state.Put(r)); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				written = fileSize(b, s.JournalPath("app"))
				b.StartTimer()
				if err := s.Compact(ctx, l); err != nil {
					b.Fatal(err)
				}
				if err := s.Unlock(ctx, l); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				written += fileSize(b, s.DocPath("app"))
				b.StartTimer()
			}
			b.ReportMetric(float64(written), "bytes-written/op")
			b.ReportMetric(float64(written)/float64(n), "bytes-written/resource")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/resource")
		})
	}
}

// BenchmarkFileApplyParallel: 10 writers (the walker's default parallelism)
// share one lock; each Apply is still one fsynced line.
func BenchmarkFileApplyParallel(b *testing.B) {
	const n, workers = 2000, 10
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		s, err := state.NewFileStore(b.TempDir(), quiet())
		if err != nil {
			b.Fatal(err)
		}
		l, err := s.Lock(ctx, "app", state.NewLockInfo("deploy", "bench"))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += workers {
					if err := s.Apply(ctx, l, state.Put(benchResource(i))); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/resource")
}

// BenchmarkFileLoad: replay of a 10,000-line journal, and load of the
// compacted document.
func BenchmarkFileLoad(b *testing.B) {
	const n = 10000
	ctx := context.Background()
	dir := b.TempDir()
	s, err := state.NewFileStore(dir, quiet())
	if err != nil {
		b.Fatal(err)
	}
	l, err := s.Lock(ctx, "app", state.NewLockInfo("deploy", "bench"))
	if err != nil {
		b.Fatal(err)
	}
	// One Apply of all resources, then one line per resource: the journal
	// a killed run leaves.
	changes := make([]state.Change, n)
	for i := range changes {
		changes[i] = state.Put(benchResource(i))
	}
	if err := s.Apply(ctx, l, changes...); err != nil {
		b.Fatal(err)
	}
	if err := s.Compact(ctx, l); err != nil {
		b.Fatal(err)
	}
	b.Run("document", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Load(ctx, "app"); err != nil {
				b.Fatal(err)
			}
		}
	})
	for i := range n {
		if err := s.Apply(ctx, l, state.Put(benchResource(i))); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("document+journal", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Load(ctx, "app"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkNaiveRewrite is the design the journal avoids, for comparison:
// the whole document written atomically after every action. Its bytes
// grow as N²/2.
func BenchmarkNaiveRewrite(b *testing.B) {
	const n = 1000
	var written int64
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		doc := state.NewDocument("app")
		b.StartTimer()
		written = 0
		for i := range n {
			r := benchResource(i)
			doc.Resources[r.Name] = r
			doc.Serial++
			data, err := json.Marshal(doc)
			if err != nil {
				b.Fatal(err)
			}
			p := filepath.Join(dir, "app.json")
			f, err := os.Create(p + ".tmp")
			if err != nil {
				b.Fatal(err)
			}
			f.Write(data)
			f.Sync()
			f.Close()
			if err := os.Rename(p+".tmp", p); err != nil {
				b.Fatal(err)
			}
			written += int64(len(data))
		}
	}
	b.ReportMetric(float64(written), "bytes-written/op")
	b.ReportMetric(float64(written)/n, "bytes-written/resource")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/resource")
}

// BenchmarkMemoryApply: the in-memory backend the engine benchmarks use.
func BenchmarkMemoryApply(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			ctx := context.Background()
			res := make([]*state.Resource, n)
			for i := range res {
				res[i] = benchResource(i)
			}
			for b.Loop() {
				s := state.NewMemoryStore()
				l, err := s.Lock(ctx, "app", state.NewLockInfo("deploy", "bench"))
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					if err := s.Apply(ctx, l, state.Put(r)); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.Compact(ctx, l); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/resource")
		})
	}
}

func fileSize(b *testing.B, p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// BenchmarkFileAppend: the CPU of one journal line without its fsync
// (Append, as a change recorded without waiting is): encoding, the lock's
// check, the write.
func BenchmarkFileAppend(b *testing.B) {
	ctx := context.Background()
	s, err := state.NewFileStore(b.TempDir(), quiet())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l, err := s.Lock(ctx, "app", state.NewLockInfo("deploy", "bench"))
	if err != nil {
		b.Fatal(err)
	}
	r := benchResource(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Append(ctx, l, state.Put(r)); err != nil {
			b.Fatal(err)
		}
	}
}
