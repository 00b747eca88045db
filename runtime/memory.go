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

// checkMemory refuses a run whose replay buffer or networks need more
// memory than the machine has available, before they are allocated (which
// would otherwise end the process out of memory instead of with an
// error). bufBytes is buffer.Config.MemoryBytes (0 for a restored
// buffer); nets estimates the networks.
func checkMemory(bufBytes uint64, cfg TrainConfig, nets uint64) error {
	avail, ok := availableMemory()
	if !ok || bufBytes+nets <= avail {
		return nil
	}
	gib := func(n uint64) float64 { return float64(n) / (1 << 30) }
	if nets > avail/2 {
		return fmt.Errorf("runtime: train: %d actors' networks of hidden widths %v need about %.1f GiB, and this machine has %.1f GiB available: lower -actors or the widths",
			cfg.Actors, cfg.Hidden, gib(nets), gib(avail))
	}
	return fmt.Errorf("runtime: train: a replay buffer of Capacity %d needs %.1f GiB, and this machine has %.1f GiB available: lower the capacity (-capacity)",
		cfg.Capacity, gib(bufBytes), gib(avail))
}

// netBytes estimates the memory of a run's networks: each actor's copy of
// the policy, and the learner's networks, targets and optimizer moments
// (at most 16 copies, TD3's), each at most the size of an MLP from in to
// out through hidden, float64 parameters and gradients. Widths are bounded
// by checkConfig, so the arithmetic cannot overflow.
func netBytes(actors int, in int, hidden []int, out int) uint64 {
	widths := append(append([]int{in}, hidden...), out)
	var p uint64
	for i := range len(widths) - 1 {
		p += uint64(widths[i]+1) * uint64(widths[i+1])
	}
	return 2 * 8 * p * uint64(actors+16)
}
