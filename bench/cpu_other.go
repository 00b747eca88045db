//go:build !unix

package bench

import "time"

// processCPU reports 0: process CPU time is only read on unix.
func processCPU() time.Duration { return 0 }
