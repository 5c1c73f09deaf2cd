package graph

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder records the order in which callbacks start and finish.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

func (r *recorder) index(s string) int {
	for i, e := range r.events {
		if e == s {
			return i
		}
	}
	return -1
}

func TestWalkOrderForwardAndReverse(t *testing.T) {
	// net <- db <- web, net <- cache <- web
	g := build(t, "web->db", "web->cache", "db->net", "cache->net")
	for _, reverse := range []bool{false, true} {
		t.Run(fmt.Sprint("reverse=", reverse), func(t *testing.T) {
			var rec recorder
			res, err := Walk(context.Background(), g, 4, reverse, func(ctx context.Context, id string) error {
				rec.add("start " + id)
				time.Sleep(time.Millisecond)
				rec.add("end " + id)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range g.Edges() {
				first, then := e.To, e.From // dependency finishes before dependent starts
				if reverse {
					first, then = then, first
				}
				if rec.index("end "+first) > rec.index("start "+then) {
					t.Errorf("%s started before %s ended: %v", then, first, rec.events)
				}
			}
			for id, o := range res.Outcomes {
				if o.Status != Done {
					t.Errorf("%s: %v", id, o)
				}
			}
		})
	}
}

// Independent branches run at the same time: two vertices that each wait
// for the other to have started can only finish if they overlap.
func TestWalkIndependentBranchesOverlap(t *testing.T) {
	g := build(t, "left->root", "right->root")
	var started sync.WaitGroup
	started.Add(2)
	both := make(chan struct{})
	go func() { started.Wait(); close(both) }()
	res, err := Walk(context.Background(), g, 2, false, func(ctx context.Context, id string) error {
		if id == "root" {
			return nil
		}
		started.Done()
		select {
		case <-both:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("the other branch never ran alongside")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	l, r := res.Outcomes["left"], res.Outcomes["right"]
	if !(l.Start.Before(r.End) && r.Start.Before(l.End)) {
		t.Errorf("branches did not overlap: left %v..%v right %v..%v", l.Start, l.End, r.Start, r.End)
	}
}

func TestWalkFailureStopsOnlyDependents(t *testing.T) {
	// db fails: api (needs db) and web (needs api) are skipped; cache and
	// worker (independent) finish.
	g := build(t, "db->net", "api->db", "web->api", "web->cache", "cache->net", "worker->cache")
	boom := errors.New("boom")
	var calls sync.Map
	res, err := Walk(context.Background(), g, 3, false, func(ctx context.Context, id string) error {
		calls.Store(id, true)
		if id == "db" {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "db: boom") {
		t.Fatalf("err = %v", err)
	}
	want := map[string]string{
		"net": "done", "cache": "done", "worker": "done",
		"db":  "failed: boom",
		"api": "skipped because db failed", "web": "skipped because db failed",
	}
	got := map[string]string{}
	for id, o := range res.Outcomes {
		got[id] = o.String()
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes = %v, want %v", got, want)
	}
	for _, id := range []string{"api", "web"} {
		if _, called := calls.Load(id); called {
			t.Errorf("%s was started", id)
		}
	}
	if f := res.Failed(); !reflect.DeepEqual(f, []string{"db"}) {
		t.Errorf("Failed() = %v", f)
	}
	if s := res.Skipped(); !reflect.DeepEqual(s, []string{"api", "web"}) {
		t.Errorf("Skipped() = %v", s)
	}
}

func TestWalkParallelismBound(t *testing.T) {
	g := New()
	for i := 0; i < 40; i++ {
		g.AddVertex("v"+strconv.Itoa(i), "service", nil)
	}
	var cur, peak atomic.Int32
	_, err := Walk(context.Background(), g, 3, false, func(ctx context.Context, id string) error {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		cur.Add(-1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p > 3 || p < 2 {
		t.Errorf("peak concurrency %d, want 2..3", p)
	}
}

func TestWalkCancelStopsNewWork(t *testing.T) {
	g := build(t, "b->a", "c->b", "d->c")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := Walk(ctx, g, 2, false, func(ctx context.Context, id string) error {
		if id == "b" {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	var got []string
	for id, o := range res.Outcomes {
		got = append(got, id+"="+o.Status.String())
	}
	sort.Strings(got)
	want := []string{"a=done", "b=done", "c=skipped", "d=skipped"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if !errors.Is(res.Outcomes["c"].Err, context.Canceled) {
		t.Errorf("c: %v", res.Outcomes["c"])
	}
}

func TestWalkPanicAndCycle(t *testing.T) {
	res, err := Walk(context.Background(), build(t, "b->a"), 1, false, func(ctx context.Context, id string) error {
		if id == "a" {
			panic("bad adapter")
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "a: panic: bad adapter") {
		t.Fatalf("err = %v", err)
	}
	if res.Outcomes["b"].Cause != "a" {
		t.Errorf("b: %v", res.Outcomes["b"])
	}
	if _, err := Walk(context.Background(), build(t, "a->b", "b->a"), 1, false, func(context.Context, string) error { return nil }); err == nil {
		t.Error("cycle not refused")
	}
}
