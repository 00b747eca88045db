//go:build !unix

package meter

import "time"

// ProcessCPU reports 0: process CPU time is only read on unix.
func ProcessCPU() time.Duration { return 0 }
