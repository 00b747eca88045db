package runtime

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// availableMemory is machineMemory; tests replace it.
var availableMemory = machineMemory

// machineMemory returns the bytes this process can still allocate: the
// smaller of the kernel's MemAvailable and the cgroup (v2) limit's
// headroom, where they can be read; ok is false where neither can.
func machineMemory() (n uint64, ok bool) {
	n = math.MaxUint64
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// "MemAvailable:   24151760 kB"
			if rest, found := strings.CutPrefix(sc.Text(), "MemAvailable:"); found {
				fields := strings.Fields(rest)
				if kb, err := strconv.ParseUint(fields[0], 10, 64); err == nil && len(fields) == 2 && fields[1] == "kB" {
					n, ok = kb<<10, true
				}
				break
			}
		}
		f.Close()
	}
	limit, lerr := readUint("/sys/fs/cgroup/memory.max")
	used, uerr := readUint("/sys/fs/cgroup/memory.current")
	if lerr == nil && uerr == nil && limit > used {
		n, ok = min(n, limit-used), true
	}
	return n, ok
}

// readUint reads a file holding one unsigned integer ("max" is an error).
func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// checkMemory refuses a run whose replay buffer alone needs more memory
// than the machine has available, before the buffer is allocated (which
// would otherwise end the process out of memory instead of with an
// error). need is buffer.Config.MemoryBytes.
func checkMemory(need uint64, capacity int) error {
	avail, ok := availableMemory()
	if !ok || need <= avail {
		return nil
	}
	return fmt.Errorf("runtime: train: a replay buffer of Capacity %d needs %.1f GiB, and this machine has %.1f GiB available: lower the capacity (-capacity)",
		capacity, float64(need)/(1<<30), float64(avail)/(1<<30))
}
