//go:build !unix

package benchmetrics

import "time"

// CPU is not measured on this platform.
func CPU() time.Duration { return 0 }

func peakRSS() int64 { return 0 }
