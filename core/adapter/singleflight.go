package adapter

import (
	"context"
)

// flight is one computation shared by every caller that asks for the same
// key while it runs, and remembered after it succeeded.
type flight[T any] struct {
	done chan struct{}
	val  T
	err  error
}

// do runs fn once per key among concurrent callers and remembers its
// outcome for the life of the Client: a success, and a failure too (an
// image that is missing or answers init wrongly does so for every resource
// of the run; nothing is asked twice for one answer). Only a failure of the
// caller's own context is forgotten, so that a later call tries again.
func do[T any](ctx context.Context, c *Client, m map[string]*flight[T], key string, fn func() (T, error)) (T, error) {
	c.mu.Lock()
	f, ok := m[key]
	if !ok {
		f = &flight[T]{done: make(chan struct{})}
		m[key] = f
		c.mu.Unlock()
		f.val, f.err = fn()
		if f.err != nil && ctx.Err() != nil {
			c.mu.Lock()
			delete(m, key)
			c.mu.Unlock()
		}
		close(f.done)
		return f.val, f.err
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
