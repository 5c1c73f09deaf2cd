package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/gcompose/gcompose/core/state"
)

// warming starts the adapter types' servers (Engine.Warm) in the
// background, each type once.
type warming struct {
	e      *Engine
	ctx    context.Context
	cancel context.CancelFunc
	lock   *state.Lock
	wg     sync.WaitGroup
	mu     sync.Mutex
	seen   map[string]bool
}

func (e *Engine) startWarm(ctx context.Context, lock *state.Lock) *warming {
	wctx, cancel := context.WithCancel(ctx)
	return &warming{e: e, ctx: wctx, cancel: cancel, lock: lock, seen: map[string]bool{}}
}

// types starts the server of every type not started yet, each with the
// resource whose plugs its calls for the whole type mount (typesOf).
func (w *warming) types(types []string, first map[string]string) {
	if w.e.Warm == nil {
		return
	}
	for _, typ := range types {
		w.mu.Lock()
		seen := w.seen[typ]
		w.seen[typ] = true
		w.mu.Unlock()
		if seen {
			continue
		}
		w.wg.Go(func() {
			if err := w.e.Warm(w.ctx, w.lock, typ, first[typ]); err != nil && w.ctx.Err() == nil {
				// Its first call meets it again and says so, with its
				// resource.
				slog.DebugContext(w.ctx, "engine: starting an adapter's server ahead of its calls failed", "adapter", typ, "err", err)
			}
		})
	}
}

// wait returns once every start returned: a start is not cut short (a
// container half started is the runner's to clean up, not ours to race).
func (w *warming) wait() {
	w.wg.Wait()
	w.cancel()
}

// cleanup runs Engine.Cleanup and says what it removed.
func (e *Engine) cleanup(ctx context.Context, lock *state.Lock) error {
	if e.Cleanup == nil {
		return nil
	}
	n, err := e.Cleanup(ctx, lock)
	if err != nil {
		return fmt.Errorf("removing containers left by an earlier run: %w", err)
	}
	if n > 0 {
		e.note("removed %d adapter container(s) left behind by an earlier, interrupted run", n)
	}
	return nil
}
