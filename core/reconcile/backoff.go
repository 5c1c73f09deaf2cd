package reconcile

import (
	"time"

	"github.com/gcompose/gcompose/internal/backoff"
)

// Backoff spaces the cycles: Interval apart while the application is
// healthy or repaired, twice as long after each repair in a row that
// failed or was refused, up to Max; every wait is moved by up to ±Jitter
// of itself, so that reconcilers of many applications, and their retries
// against one yagna, do not fall into step.
type Backoff struct {
	Interval time.Duration
	Max      time.Duration
	// Jitter is a fraction: 0.2 waits between 80% and 120%.
	Jitter float64
}

// Wait is how long to wait after failures repairs in a row failed; r is a
// random number in [0, 1).
func (b Backoff) Wait(failures int, r float64) time.Duration {
	return backoff.Policy{Base: b.Interval, Max: b.Max, Jitter: b.Jitter}.Delay(failures, r)
}
