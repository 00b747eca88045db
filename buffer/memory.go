package buffer

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"
)

// MaxBytes is the most memory New may allocate for one Buffer's storage and
// trees, and NewBatch for one Batch (1 TiB). A configuration above it is
// refused with ErrConfig before anything is allocated. It is a sanity bound,
// not a check of the machine's memory: callers that want to fail early on a
// smaller machine compare Config.MemoryBytes with the memory they have.
const MaxBytes = 1 << 40

// satMul and satAdd are overflow-saturating uint64 arithmetic: once a sum or product
// overflows, the result is math.MaxUint64 (far above MaxBytes).
func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

func satAdd(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

// itemBytes is the bytes of the columns one item occupies under c (a
// validated config): what NewBatch allocates per row besides Refs, Prob and
// Weight, and the fields of a stored record before its padding
// (recordBytes). Saturating.
func itemBytes(c *Config) uint64 {
	obs := satMul(uint64(c.ObsDim), 2*4) // Obs and NextObs
	n := satAdd(obs, 4+4+4)              // Reward, Discount, Flags
	if c.Action == Discrete {
		n = satAdd(n, 4)
	} else {
		n = satAdd(n, satMul(uint64(c.ActionDim), 4))
	}
	if c.Episode {
		n = satAdd(n, 8+4)
	}
	if c.GlobalStep {
		n = satAdd(n, 8)
	}
	if c.ActorID {
		n = satAdd(n, 4)
	}
	if c.StateHash {
		n = satAdd(n, 8+8)
	}
	for _, f := range c.Floats {
		n = satAdd(n, satMul(uint64(max(f.Width, 0)), 4))
	}
	return n
}

// batchRowBytes is the bytes NewBatch allocates per row: the item columns
// plus Refs, Prob and Weight. Never 0.
func batchRowBytes(c *Config) uint64 {
	return satAdd(itemBytes(c), uint64(unsafe.Sizeof(Ref{}))+8+8)
}

// storageBytes is the bytes New allocates for c (validated): the records
// (recordBytes per slot), the sum tree (and min tree unless NoMinTree) and the stripe headers.
// Saturating; Capacity and Stripes are already bounded, so the layout
// arithmetic cannot overflow.
func storageBytes(c *Config) uint64 {
	n := satMul(uint64(c.Capacity), recordBytes(c))
	lay := newLayout(c.Capacity, c.Stripes)
	var nodes uint64
	for k, m := range lay.m {
		w := uint64(c.Stripes) * uint64(m)
		nodes += w // sum tree, every level
		if k > 0 && !c.NoMinTree {
			nodes += w // min tree, levels above the leaves
		}
	}
	n = satAdd(n, satMul(nodes, 8))
	return satAdd(n, satMul(uint64(c.Stripes), uint64(unsafe.Sizeof(stripe{}))))
}

// MemoryBytes validates c (filling defaults as New does) and returns the
// bytes New(c) allocates for the buffer's records, trees and stripe
// headers. It is the sum of the slices' sizes: the heap can take up to a
// page (8 KiB) more per slice for rounding, and the Buffer struct and
// slice headers are left out, so it is within 1% for any buffer of a few
// megabytes or more. The runtime compares it with the machine's memory
// before it starts training. O(len(Floats) + tree levels).
//
// Errors: those of Validate (ErrConfig, wrapped), including a configuration
// that needs more than MaxBytes.
func (c Config) MemoryBytes() (uint64, error) {
	c, err := c.validated()
	if err != nil {
		return 0, err
	}
	return storageBytes(&c), nil
}

// checkMemory reports (wrapping ErrConfig) a validated config whose storage
// exceeds MaxBytes.
func checkMemory(c *Config) error {
	if n := storageBytes(c); n > MaxBytes {
		return fmt.Errorf("%w: the buffer would need %s (Capacity %d × %d bytes per item, plus trees), above the size limit MaxBytes (%s)",
			ErrConfig, formatBytes(n), c.Capacity, recordBytes(c), formatBytes(MaxBytes))
	}
	return nil
}

// formatBytes prints n in binary units, "overflow" when saturated.
func formatBytes(n uint64) string {
	if n == math.MaxUint64 {
		return "more than 16 EiB"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
