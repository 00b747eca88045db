package learner

import (
	"context"
	"errors"
	"sync/atomic"
)

// ErrBusy: a learner method was called while another call on the same
// learner was still running (a learner is for one goroutine at a time).
// The refused call does nothing.
var ErrBusy = errors.New("learner: already in use")

// busy detects overlapping calls on one learner: an operation that reads
// and writes its state (Step) enters it and leaves it when done, and a
// call that finds it held is refused with ErrBusy rather than racing. One
// compare-and-swap and one store per call.
type busy struct {
	op atomic.Pointer[string] // the running operation's name, nil when idle
}

// opStep names Step (a static string, so enter allocates nothing).
var opStep = "Step"

// enter claims the learner for op, or reports the call already running.
func (b *busy) enter(op *string) error {
	if b.op.CompareAndSwap(nil, op) {
		return nil
	}
	cur := "another call"
	if p := b.op.Load(); p != nil {
		cur = *p
	}
	return errorf(ErrBusy, "%s called while %s is running (call a learner from one goroutine at a time)", *op, cur)
}

// enterStep is the entry every learner's Step shares: a nil ctx is
// ErrConfig, a done ctx its error, an overlapping call ErrBusy; on success
// the caller owns the learner until it calls exit.
func (b *busy) enterStep(ctx context.Context) error {
	if ctx == nil {
		return errorf(ErrConfig, "Step: nil context")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.enter(&opStep)
}

// exit releases the learner.
func (b *busy) exit() { b.op.Store(nil) }
