package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// ErrRateLimited is returned (wrapped) when a call waited longer than the
// limiter's Timeout: the other side (inserters or the learner) stopped
// making progress. Test with errors.Is.
var ErrRateLimited = errors.New("runtime: rate limiter timeout")

// RateLimiterConfig configures a RateLimiter with Reverb's
// SampleToInsertRatio semantics.
type RateLimiterConfig struct {
	// SamplesPerInsert is how many times, on average, each inserted item is
	// sampled over its lifetime (the replay ratio). > 0.
	SamplesPerInsert float64
	// MinSizeToSample: sampling waits until this many items have been
	// inserted (learning starts). >= 1.
	MinSizeToSample int64
	// ErrorBuffer is how far the sample/insert balance may drift, in sampled
	// items, before the side that is ahead waits: with
	// error = (inserted - MinSizeToSample)·SamplesPerInsert - sampled,
	// inserts wait while error > ErrorBuffer and samples while
	// error < -ErrorBuffer. Must be >= max(1, SamplesPerInsert) (Reverb
	// requires the range to be at least 2·max(1, SamplesPerInsert) wide, or
	// calls could block each other forever).
	ErrorBuffer float64
	// Timeout bounds one wait; 0 waits as long as the context allows.
	Timeout time.Duration
}

// RateLimiter keeps the learner's sampling and the actors' inserting at a
// fixed ratio (Reverb's SampleToInsertRatio), so a run consumes data the
// same way on 2 or 64 cores: a fast learner waits for data, fast actors wait
// for the learner. Calls are made per batch; a batch is admitted when its
// first item fits, so the balance may overshoot by one batch.
//
// Safe for concurrent use. Its lock guards a few counters and is held for
// O(1) work; waiting callers block on a channel, under their context.
type RateLimiter struct {
	mu sync.Mutex
	// cfg and the balance bounds derived from it (setLocked) may change
	// at run time (SetConfig).
	cfg              RateLimiterConfig
	minDiff, maxDiff float64

	inserted int64
	sampled  int64
	// pending counts items reserved by ReserveInsert and not yet settled
	// by CommitInsert or AbortInsert: they count toward the ratio but not
	// toward MinSizeToSample. Invariant: 0 <= pending <= inserted.
	pending int64
	// others is the items inserted into the other shards of a fleet, as
	// its learner last reported them (SetFleetCounts); 0 for a limiter
	// that is not a fleet's shard. It counts toward the insert side only.
	others int64
	// fleetAt is when the fleet's counts were last installed, lease how
	// long they hold (0: they never go stale) and allowance how far, in
	// items, the balance may run past its bound on stale counts
	// (RenewFleetCounts). pendingStale is the reserved items admitted on
	// stale counts and not yet settled (their stats are taken back when
	// they are aborted).
	fleetAt      time.Time
	lease        time.Duration
	allowance    int64
	pendingStale int64
	// now is the clock (nil: time.Now; a test's fake).
	now   func() time.Time
	wake  chan struct{} // closed (and replaced) whenever the counters move
	stats RateLimiterStats
}

// RateLimiterStats counts what the limiter did.
type RateLimiterStats struct {
	Inserted, Sampled int64
	// InsertWaits and SampleWaits count calls that had to wait;
	// InsertWait and SampleWait are the time they waited in total.
	InsertWaits, SampleWaits int64
	InsertWait, SampleWait   time.Duration
	// Timeouts counts calls that gave up with ErrRateLimited.
	Timeouts int64
	// StaleInserts and StaleItems count the insert calls, and their items,
	// that a fleet shard's limiter admitted on stale fleet counts (their
	// lease passed without a renewal, RenewFleetCounts) although the
	// counts held them; a reservation aborted (AbortInsert) is taken back.
	StaleInserts, StaleItems int64
}

// NewRateLimiter validates cfg.
func NewRateLimiter(cfg RateLimiterConfig) (*RateLimiter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &RateLimiter{wake: make(chan struct{})}
	r.setLocked(cfg)
	return r, nil
}

// validate reports the first field of c out of range.
func (c RateLimiterConfig) validate() error {
	switch {
	case !(c.SamplesPerInsert > 0) || math.IsInf(c.SamplesPerInsert, 0):
		return fmt.Errorf("runtime: rate limiter: SamplesPerInsert must be positive and finite, got %v", c.SamplesPerInsert)
	case c.MinSizeToSample < 1:
		return fmt.Errorf("runtime: rate limiter: MinSizeToSample must be >= 1, got %d", c.MinSizeToSample)
	case !(c.ErrorBuffer >= math.Max(1, c.SamplesPerInsert)) || math.IsInf(c.ErrorBuffer, 0):
		return fmt.Errorf("runtime: rate limiter: ErrorBuffer must be finite and >= max(1, SamplesPerInsert) = %v, got %v",
			math.Max(1, c.SamplesPerInsert), c.ErrorBuffer)
	case c.Timeout < 0:
		return fmt.Errorf("runtime: rate limiter: Timeout must not be negative, got %v", c.Timeout)
	}
	return nil
}

// setLocked installs cfg (valid) and the balance bounds derived from it.
func (r *RateLimiter) setLocked(cfg RateLimiterConfig) {
	off := cfg.SamplesPerInsert * float64(cfg.MinSizeToSample)
	r.cfg, r.minDiff, r.maxDiff = cfg, off-cfg.ErrorBuffer, off+cfg.ErrorBuffer
}

// Config returns the limiter's configuration. O(1); safe for concurrent
// use.
func (r *RateLimiter) Config() RateLimiterConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg
}

// SetConfig replaces the limiter's configuration at run time (a replay
// server's SetLimiter), after validating it as NewRateLimiter does; an
// invalid cfg is an error and changes nothing. The counts of inserted,
// sampled and reserved items are kept, and the new bounds apply to them
// from the next admission: raising SamplesPerInsert or ErrorBuffer may
// admit samples at once, lowering them may hold samples or inserts until
// the other side catches up. Waiting callers are woken to re-check; a
// wait already under way keeps the Timeout it started with. O(1); safe
// for concurrent use.
func (r *RateLimiter) SetConfig(cfg RateLimiterConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setLocked(cfg)
	close(r.wake)
	r.wake = make(chan struct{})
	return nil
}

// diffLocked is inserted·SamplesPerInsert - sampled.
func (r *RateLimiter) diffLocked() float64 {
	return float64(r.inserted)*r.cfg.SamplesPerInsert - float64(r.sampled)
}

func (r *RateLimiter) canInsertLocked() bool { return r.fitsLocked(0) }

// fitsLocked reports whether an insert fits the balance with extra
// sampled items of room past its bound.
func (r *RateLimiter) fitsLocked(extra float64) bool {
	ins := r.inserted + r.others
	return ins < r.cfg.MinSizeToSample || float64(ins)*r.cfg.SamplesPerInsert-float64(r.sampled)+r.cfg.SamplesPerInsert <= r.maxDiff+extra
}

// admitInsertLocked reports whether an insert is admitted now: on the
// balance, or on stale fleet counts within the allowance (stale). When
// it is not, staleAt is when the counts go stale (zero: no lease, or
// stale already: only a renewal, the learner's samples or a settlement
// can admit it). It reads the clock only when the balance holds the
// insert and a lease runs.
func (r *RateLimiter) admitInsertLocked() (ok, stale bool, staleAt time.Time) {
	if r.canInsertLocked() {
		return true, false, time.Time{}
	}
	if r.lease <= 0 || r.allowance <= 0 {
		return false, false, time.Time{}
	}
	at := r.fleetAt.Add(r.lease)
	if r.clock().Before(at) {
		return false, false, at
	}
	if r.fitsLocked(float64(r.allowance) * r.cfg.SamplesPerInsert) {
		return true, true, time.Time{}
	}
	return false, false, time.Time{}
}

// clock is the limiter's time now.
func (r *RateLimiter) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// AdmitsSample reports whether a limiter configured with c whose counts
// are inserted items (all stored) and sampled items admits a batch of
// samples now (its first item fits, as AwaitSample admits): what a
// fleet's learner checks against the counts of all its shards. O(1).
func (c RateLimiterConfig) AdmitsSample(inserted, sampled int64) bool {
	minDiff := c.SamplesPerInsert*float64(c.MinSizeToSample) - c.ErrorBuffer
	return inserted >= c.MinSizeToSample && float64(inserted)*c.SamplesPerInsert-float64(sampled)-1 >= minDiff
}

// canSampleLocked: learning has started (MinSizeToSample items stored,
// reservations not yet committed left out) and the balance admits one
// more sampled item.
func (r *RateLimiter) canSampleLocked() bool {
	return r.inserted-r.pending >= r.cfg.MinSizeToSample && r.diffLocked()-1 >= r.minDiff
}

// AwaitInsert waits until n more items may be inserted and records them. It
// returns ctx's error if ctx ends first, or ErrRateLimited after Timeout.
// The items count as stored at once: a caller that stores them after the
// call returns (into a buffer a learner samples concurrently) uses
// ReserveInsert and CommitInsert instead.
func (r *RateLimiter) AwaitInsert(ctx context.Context, n int) error {
	return r.awaitOp(ctx, n, opInsert)
}

// ReserveInsert is AwaitInsert for a caller that stores the n items after
// it returns: they count toward the ratio at once (so other inserts wait
// for the learner as they should), but toward MinSizeToSample only once
// CommitInsert(n) says they are in the buffer, so learning never starts on
// items a sample cannot see yet (with many writers inserting directly,
// thousands of reserved items can be in flight). Every successful
// ReserveInsert must be followed by CommitInsert or AbortInsert of the
// same n. O(1) plus the wait.
func (r *RateLimiter) ReserveInsert(ctx context.Context, n int) error {
	return r.awaitOp(ctx, n, opReserve)
}

// CommitInsert settles n items reserved by ReserveInsert that are now
// stored. It refuses to settle more than are reserved. O(1).
func (r *RateLimiter) CommitInsert(n int) error { return r.settle(n, true) }

// AbortInsert settles n reserved items that were not stored (the insert
// failed): they leave the balance as if never admitted. O(1).
func (r *RateLimiter) AbortInsert(n int) error { return r.settle(n, false) }

func (r *RateLimiter) settle(n int, stored bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n < 1 || int64(n) > r.pending {
		return fmt.Errorf("runtime: rate limiter: settling %d items with %d reserved", n, r.pending)
	}
	// Which reservation this is the limiter cannot tell, only its size:
	// a commit is taken as a fresh reservation's while the fresh ones
	// pending cover it, an abort as a stale one's while stale ones are
	// pending (exact unless fresh and stale reservations are in flight at
	// once, around a renewal or the lease's end).
	var stale int64
	if stored {
		stale = max(int64(n)-(r.pending-r.pendingStale), 0)
	} else {
		stale = min(int64(n), r.pendingStale)
		if stale > 0 { // never stored: not counted as admitted on stale counts
			r.stats.StaleInserts--
			r.stats.StaleItems -= stale
		}
	}
	r.pendingStale -= stale
	r.pending -= int64(n)
	if !stored {
		r.inserted -= int64(n)
		r.stats.Inserted -= int64(n)
	}
	close(r.wake)
	r.wake = make(chan struct{})
	return nil
}

// AwaitSample waits until n items may be sampled and records them. It
// returns ctx's error if ctx ends first, or ErrRateLimited after Timeout.
func (r *RateLimiter) AwaitSample(ctx context.Context, n int) error {
	return r.awaitOp(ctx, n, opSample)
}

// The kinds of admission awaitOp grants.
type limiterOp uint8

const (
	opSample limiterOp = iota
	opInsert
	opReserve // an insert whose items are stored later (CommitInsert)
)

// CanInsert reports, without waiting or recording, whether an insert would
// be admitted now.
func (r *RateLimiter) CanInsert() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok, _, _ := r.admitInsertLocked()
	return ok
}

// CanSample reports, without waiting or recording, whether a sample would
// be admitted now.
func (r *RateLimiter) CanSample() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.canSampleLocked()
}

func (r *RateLimiter) awaitOp(ctx context.Context, n int, op limiterOp) error {
	insert := op != opSample
	if n < 1 {
		return fmt.Errorf("runtime: rate limiter: batch of %d items", n)
	}
	var start time.Time
	var timeout <-chan time.Time
	var timeoutCfg time.Duration // the Timeout the wait started with
	waited := false
	var staleTimer *time.Timer // wakes an insert held on fleet counts when they go stale
	defer func() {
		if staleTimer != nil {
			staleTimer.Stop()
		}
	}()
	for {
		r.mu.Lock()
		var ok, stale bool
		var staleAt time.Time
		if insert {
			ok, stale, staleAt = r.admitInsertLocked()
		} else {
			ok = r.canSampleLocked()
		}
		if ok {
			if insert {
				r.inserted += int64(n)
				r.stats.Inserted += int64(n)
				if op == opReserve {
					r.pending += int64(n)
				}
				if stale {
					if op == opReserve {
						r.pendingStale += int64(n)
					}
					r.stats.StaleInserts++
					r.stats.StaleItems += int64(n)
				}
			} else {
				r.sampled += int64(n)
				r.stats.Sampled += int64(n)
			}
			if waited {
				d := time.Since(start)
				if insert {
					r.stats.InsertWaits++
					r.stats.InsertWait += d
				} else {
					r.stats.SampleWaits++
					r.stats.SampleWait += d
				}
			}
			close(r.wake)
			r.wake = make(chan struct{})
			r.mu.Unlock()
			return nil
		}
		wake, limit := r.wake, r.cfg.Timeout
		r.mu.Unlock()
		if !waited {
			waited, start, timeoutCfg = true, time.Now(), limit
			if limit > 0 {
				t := time.NewTimer(limit)
				defer t.Stop()
				timeout = t.C
			}
		}
		var staleC <-chan time.Time
		if !staleAt.IsZero() {
			d := staleAt.Sub(r.clock())
			if staleTimer == nil {
				staleTimer = time.NewTimer(d)
			} else {
				staleTimer.Reset(d) // Go 1.23+ timers: no stale value to drain
			}
			staleC = staleTimer.C
		}
		select {
		case <-wake:
		case <-staleC:
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			r.mu.Lock()
			r.stats.Timeouts++
			ins, smp := r.inserted, r.sampled
			r.mu.Unlock()
			side := "sample"
			if insert {
				side = "insert"
			}
			return fmt.Errorf("%w: %s of %d items waited %v (inserted %d, sampled %d)", ErrRateLimited, side, n, timeoutCfg, ins, smp)
		}
	}
}

// SetFleetCounts makes the limiter the insert side of one shard of a
// fleet whose learner enforces the ratio over all shards (Reverb's
// SampleToInsertRatio on the fleet's counts): sampled is the items sampled
// over every shard, othersInserted the items inserted into the other
// shards, both as the learner knows them. From then on inserts are
// admitted while (Inserted + othersInserted)·SamplesPerInsert − sampled
// is within the bound, so actors wait for a slow learner whichever shard
// it samples from; the sample side is the learner's (a fleet's draws do
// not call AwaitSample). A later call replaces both counts (the learner's
// are authoritative: a restarted learner's may be lower). Waiting inserts
// are woken to re-check. Negative counts are an error. The counts never go
// stale (RenewFleetCounts with no lease). O(1); safe for concurrent use.
func (r *RateLimiter) SetFleetCounts(othersInserted, sampled int64) error {
	return r.RenewFleetCounts(othersInserted, sampled, 0, 0)
}

// RenewFleetCounts is SetFleetCounts with a lease: the learner promises to
// renew the counts within lease. Once lease has passed without a renewal
// the counts are stale — the learner cannot reach this shard (a network
// partition on its side only) or has stopped drawing — and the limiter
// relaxes its bound by allowance items: it admits the inserts the stale
// counts would hold while the balance is at most allowance items
// (allowance·SamplesPerInsert sampled items) past the bound (a batch is
// admitted when its first item fits, so the last may overshoot), counted
// in RateLimiterStats.StaleInserts and StaleItems; past that inserts are
// held again. The allowance is thus spent across renewals, not reset by
// them: it is room in the balance, which only the learner's samples
// (reported by a renewal) or an aborted reservation give back, so at no
// time does the shard hold more than allowance items (and a batch) past
// the ratio's bound, however often the lease lapses (a flapping link, a
// learner's pauses). A stale shard cannot judge the fleet's balance (the
// learner's samples elsewhere lower it unseen), and holding on it would
// hold its actors — and, behind them, the learner on every other shard —
// until the learner's link returned. Admitting more inserts never lets
// the learner over-sample: the learner admits draws on the inserts the
// shards report, so the surplus is only sampled down once the learner is
// back (holding the actors meanwhile, as fresh counts do). lease <= 0 or
// allowance <= 0: the counts never go stale. Waiting inserts are woken to
// re-check, and again when the counts go stale. O(1); safe for
// concurrent use.
func (r *RateLimiter) RenewFleetCounts(othersInserted, sampled int64, lease time.Duration, allowance int64) error {
	if othersInserted < 0 || sampled < 0 {
		return fmt.Errorf("runtime: rate limiter: fleet counts %d inserted elsewhere, %d sampled (want >= 0)", othersInserted, sampled)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.others, r.sampled = othersInserted, sampled
	r.lease, r.allowance = max(lease, 0), max(allowance, 0)
	if r.lease > 0 {
		r.fleetAt = r.clock()
	}
	close(r.wake)
	r.wake = make(chan struct{})
	return nil
}

// Counts returns the items inserted into this limiter's table (reserved
// ones included) and the items sampled (a fleet shard's: the fleet's, as
// SetFleetCounts set them). O(1); safe for concurrent use.
func (r *RateLimiter) Counts() (inserted, sampled int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inserted, r.sampled
}

// Stats returns a snapshot of the counters. O(1).
func (r *RateLimiter) Stats() RateLimiterStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// limiterState is the balance a checkpoint keeps: inserted includes the
// pending reservations.
type limiterState struct{ inserted, sampled, pending int64 }

func (r *RateLimiter) snapshot() limiterState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return limiterState{r.inserted, r.sampled, r.pending}
}

// restore sets the balance of a resumed run, so learning continues where it
// stopped instead of waiting for MinSizeToSample new inserts.
func (r *RateLimiter) restore(inserted, sampled int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inserted, r.sampled, r.pending, r.pendingStale = inserted, sampled, 0, 0
	close(r.wake)
	r.wake = make(chan struct{})
}
