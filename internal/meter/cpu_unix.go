//go:build unix

package meter

import (
	"syscall"
	"time"
)

// ProcessCPU is the process's user+system CPU time so far, or 0 if the
// platform cannot tell.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
