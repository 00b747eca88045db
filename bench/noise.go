package bench

import (
	"context"
	"math"
	"time"

	"github.com/apexrl/apex/internal/meter"
)

// Noise is the machine's own timing jitter, for reading the learner's tail
// latencies: a CPU-only loop (no memory traffic, no allocation, no
// synchronisation) calibrated to last as long as the learner's median step
// alone, timed exactly like the learner's steps, on an otherwise idle
// process. On a quiet dedicated machine its p99 is close to its p50; on a
// shared virtual machine, preemptions and steal time show up here as they
// do in the learner's p99 and p99.9, which therefore cannot be much lower.
type Noise struct {
	// LoopUS is the loop's calibrated length (the apex learner's solo
	// median step, or its median under load without a solo run).
	LoopUS float64 `json:"loop_us"`
	// Samples is the number of timed loops.
	Samples uint64  `json:"samples"`
	P50US   float64 `json:"p50_us"`
	P99US   float64 `json:"p99_us"`
	P999US  float64 `json:"p999_us"`
	MaxUS   float64 `json:"max_us"`
}

// noiseSink keeps the compiler from removing spin's loop.
var noiseSink uint64

// spin runs n steps of a 64-bit linear congruential generator: a serial
// dependency chain of multiply-adds, about one step per 4 cycles. O(n).
func spin(n int) {
	x := noiseSink | 1
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	noiseSink = x
}

// measureNoise calibrates spin to last about loopUS microseconds, then
// times it back to back for d (or until ctx ends) into a histogram. It
// runs on the calling goroutine and starts none.
func measureNoise(ctx context.Context, loopUS float64, d time.Duration) Noise {
	loop := time.Duration(math.Round(loopUS * 1e3))
	n := 1 << 12
	for { // double until a run lasts at least 1 ms, then scale
		t := time.Now()
		spin(n)
		if el := time.Since(t); el >= time.Millisecond || n >= 1<<30 {
			n = max(1, int(float64(n)*float64(loop)/float64(el)))
			break
		}
		n *= 2
	}
	var h meter.Histogram
	end := time.Now().Add(d)
	for i := 0; ; i++ {
		s := time.Now()
		if s.After(end) || (i%256 == 0 && ctx.Err() != nil) {
			break
		}
		spin(n)
		h.Record(time.Since(s))
	}
	return Noise{LoopUS: loopUS, Samples: h.Count(), P50US: us(h.Quantile(0.5)), P99US: us(h.Quantile(0.99)),
		P999US: us(h.Quantile(0.999)), MaxUS: us(h.Max())}
}
