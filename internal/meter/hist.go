// Package meter holds the measuring tools of apex's load tests (apex bench,
// apex loadtest): a fixed-size latency histogram and the CPU time of a
// process. It starts no goroutines.
package meter

import (
	"math"
	"math/bits"
	"time"
)

// Latency histogram: log-linear buckets in the style of HdrHistogram, with
// 64 sub-buckets per power of two, so a recorded duration is known to
// within 1/64 (1.6%) of its value; values below 128 ns are exact. The
// histogram is a fixed array (about 30 KiB) covering every int64, so
// recording never allocates and a run of any length uses the same memory.
const (
	histSubBits = 6
	histSub     = 1 << histSubBits                       // sub-buckets per power of two
	histBuckets = (64-histSubBits-1)*histSub + 2*histSub // enough for every non-negative int64
)

// Histogram counts durations in nanoseconds. The zero value is empty and
// ready to use. Not safe for concurrent use: each measuring goroutine owns
// one.
type Histogram struct {
	counts [histBuckets]uint64
	n      uint64
	max    int64
}

// histIndex is the bucket of v >= 0.
func histIndex(v int64) int {
	if v < 2*histSub {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - histSubBits - 1 // v>>e is in [64, 128)
	return e*histSub + int(v>>e)
}

// histUpper is the largest value of bucket i.
func histUpper(i int) int64 {
	if i < 2*histSub {
		return int64(i)
	}
	e := i/histSub - 1
	m := int64(i - e*histSub)
	return (m+1)<<e - 1
}

// Record adds one duration; negative durations count as 0.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[histIndex(v)]++
	h.n++
	h.max = max(h.max, v)
}

// Quantile returns the smallest bucket bound below which at least a
// fraction q of the recorded values lie (the bucket's largest value, capped
// at the exact maximum), or 0 if nothing was recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var cum uint64
	for i, c := range h.counts {
		if cum += c; cum >= rank {
			return time.Duration(min(histUpper(i), h.max))
		}
	}
	return time.Duration(h.max)
}

// Count is the number of durations recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest duration recorded (0 if none).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }
