package learner

import "fmt"

// Workers is the capability a data-parallel learner step runs its shards
// on: the learner splits its sampled batch into contiguous row shards,
// hands Run one function call per shard, and reduces the shards'
// gradients itself, in shard order, on the calling goroutine. The learner
// starts no goroutine: whoever provides Workers owns them (the runtime's
// worker pool, started and stopped with its run), or runs the shards in
// turn (SerialWorkers).
//
// A learner's result does not depend on how Run schedules the calls:
// each shard writes only its own rows and its own gradient buffer, and
// the reduction order is fixed, so the same W gives the same bits on one
// goroutine or on W.
type Workers interface {
	// Workers returns W (≥ 1), the most shards Run runs at once: a learner
	// splits its batch into min(W, Batch) shards. Constant for the
	// Workers' life.
	Workers() int
	// Run calls f(0), f(1), …, f(n−1), each exactly once, possibly
	// concurrently on other goroutines, and returns once all have
	// returned (every call happens before Run returns). n is at most
	// Workers(). A panic in a call is re-raised by Run on the caller's
	// goroutine after the other calls have returned. Run is called by one
	// goroutine at a time and must not allocate per call.
	Run(n int, f func(shard int))
}

// SerialWorkers returns a Workers of w shards that runs them one after
// the other on the caller's goroutine: the sharded step's arithmetic
// without goroutines (tests, and the reference a pool's result must
// equal bit for bit). It panics if w < 1.
func SerialWorkers(w int) Workers {
	if w < 1 {
		panic(fmt.Sprintf("learner: SerialWorkers(%d): w must be >= 1", w))
	}
	return serialWorkers(w)
}

type serialWorkers int

func (s serialWorkers) Workers() int { return int(s) }

func (s serialWorkers) Run(n int, f func(int)) {
	for i := range n {
		f(i)
	}
}

// shardRange returns the rows [lo, hi) of shard s of n over b rows: the
// batch cut into n contiguous shards whose sizes differ by at most one.
func shardRange(b, n, s int) (lo, hi int) { return s * b / n, (s + 1) * b / n }

// shardCount returns how many shards a learner of batch b runs on w (nil:
// 1, the serial step).
func shardCount(w Workers, b int) (int, error) {
	if w == nil {
		return 1, nil
	}
	n := w.Workers()
	if n < 1 {
		return 0, errorf(ErrConfig, "Workers() = %d (must be >= 1)", n)
	}
	return min(n, b), nil
}

// The phases of a sharded step, as bits of the phase a shard function
// runs: the forward half (targets, forwards, |δ|), the backward half
// (loss and backward pass; needs the whole batch's loss weights), and
// TD3's actor gradient. Without a Normalizer the weights are known before
// the forward half, so one Run does both halves (phaseBoth): one
// hand-off to the workers per step instead of two.
const (
	phaseForward  = 1
	phaseBackward = 2
	phaseBoth     = phaseForward | phaseBackward
	phaseActor    = 4
)
