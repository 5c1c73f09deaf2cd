package backoff

import (
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p        Policy
		failures int
		r        float64
		want     time.Duration
	}{
		{"no failure waits Base", Policy{Base: time.Second, Max: time.Minute}, 0, 0.5, time.Second},
		{"doubles per failure", Policy{Base: time.Second, Max: time.Minute}, 3, 0.5, 8 * time.Second},
		{"capped at Max", Policy{Base: time.Second, Max: 5 * time.Second}, 3, 0.5, 5 * time.Second},
		{"many failures stay at Max", Policy{Base: 50 * time.Millisecond, Max: time.Second}, 1000, 0, time.Second},
		{"Max below Base: Base", Policy{Base: time.Second}, 4, 0.5, time.Second},
		{"jitter low end", Policy{Base: 10 * time.Second, Max: time.Minute, Jitter: 0.2}, 0, 0, 8 * time.Second},
		{"jitter high end", Policy{Base: 10 * time.Second, Max: time.Minute, Jitter: 0.2}, 0, 1, 12 * time.Second},
		{"jitter above 1 counts as 1", Policy{Base: 10 * time.Second, Max: time.Minute, Jitter: 3}, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Delay(tc.failures, tc.r); got != tc.want {
				t.Fatalf("%+v.Delay(%d, %v) = %s, want %s", tc.p, tc.failures, tc.r, got, tc.want)
			}
		})
	}
}
