//go:build unix

package resolve

import (
	"syscall"
	"testing"
	"time"
)

// reportCPU adds a cpu-ns/op metric: the process's user+system CPU time per
// iteration, which stays meaningful when the machine is shared and wall
// time (ns/op) is not. Call it with the value of cpuNow() taken after
// b.ResetTimer.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuNow()-start)/float64(b.N), "cpu-ns/op")
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportPeakRSS adds the process's peak resident set size so far, in MB
// (meaningful when the benchmark runs alone: -bench 'LoadAndResolve').
func reportPeakRSS(b *testing.B) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB") // Maxrss is in KiB on Linux
	}
}
