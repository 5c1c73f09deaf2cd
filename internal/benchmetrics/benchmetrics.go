// Package benchmetrics adds figures to benchmarks that stay meaningful on a
// shared machine, where wall time (ns/op) is not: CPU time per iteration and
// peak resident memory; and the machine's load, read next to them.
package benchmetrics

import (
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Size is n unless GCOMPOSE_BENCH_<name> is set to a positive number (to try
// a benchmark quickly at a smaller size; the documented figures use the
// defaults).
func Size(name string, n int) int {
	if v, err := strconv.Atoi(os.Getenv("GCOMPOSE_BENCH_" + name)); err == nil && v > 0 {
		return v
	}
	return n
}

// LoadAvg is the machine's 1-minute load average, NaN when unknown: the
// machine is shared, so a benchmark's figures are read next to it.
func LoadAvg() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return math.NaN()
	}
	return f
}

// ReportCPU adds a cpu-ns/op metric: the process's user+system CPU time per
// iteration since start, a value of CPU() taken after b.ResetTimer.
func ReportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(CPU()-start)/float64(b.N), "cpu-ns/op")
}

// ReportPeakRSS adds the process's peak resident set size so far, in MB
// (meaningful when the benchmark runs alone).
func ReportPeakRSS(b *testing.B) {
	if rss := peakRSS(); rss > 0 {
		b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MB")
	}
}
