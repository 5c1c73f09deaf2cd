// Package backoff is the one exponential backoff of the tree: a wait that
// starts at Base, doubles after each failure in a row up to Max, and is
// moved by up to ±Jitter of itself. The reconciler spaces its cycles with
// it and the etcd state backend its retries; the randomness is the
// caller's, so that a test can fix it.
package backoff

import "time"

// Policy is an exponential backoff.
type Policy struct {
	// Base is the wait after no failure.
	Base time.Duration
	// Max caps the doubling; at or below Base, every wait is Base.
	Max time.Duration
	// Jitter is a fraction in [0, 1]: 0.2 waits between 80% and 120%.
	Jitter float64
}

// Delay is how long to wait after failures failures in a row; r is a
// random number in [0, 1) (any value when Jitter is 0).
func (p Policy) Delay(failures int, r float64) time.Duration {
	d := p.Base
	for i := 0; i < failures && d < p.Max; i++ {
		d *= 2
	}
	if p.Max > 0 && d > p.Max {
		d = p.Max
	}
	j := min(max(p.Jitter, 0), 1)
	return time.Duration(float64(d) * (1 - j + 2*j*r))
}
