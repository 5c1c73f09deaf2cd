// Package benchmetrics adds figures to benchmarks that stay meaningful on a
// shared machine, where wall time (ns/op) is not: CPU time per iteration and
// peak resident memory.
package benchmetrics

import (
	"testing"
	"time"
)

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
