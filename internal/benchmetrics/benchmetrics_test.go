package benchmetrics_test

import (
	"math"
	"runtime"
	"testing"

	"github.com/gcompose/gcompose/internal/benchmetrics"
)

func TestSize(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want int
	}{
		{"", 1000},
		{"50", 50},
		{"0", 1000},
		{"-3", 1000},
		{"many", 1000},
	} {
		t.Setenv("GCOMPOSE_BENCH_TEST_N", tc.env)
		if got := benchmetrics.Size("TEST_N", 1000); got != tc.want {
			t.Errorf("GCOMPOSE_BENCH_TEST_N=%q: Size = %d, want %d", tc.env, got, tc.want)
		}
	}
}

func TestLoadAvg(t *testing.T) {
	got := benchmetrics.LoadAvg()
	if runtime.GOOS != "linux" {
		t.Skipf("no /proc/loadavg on %s (LoadAvg = %v)", runtime.GOOS, got)
	}
	if math.IsNaN(got) || got < 0 {
		t.Fatalf("LoadAvg = %v on Linux, want the 1-minute load average of /proc/loadavg", got)
	}
}
