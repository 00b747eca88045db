package runtime

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRateLimiterValidation(t *testing.T) {
	for _, c := range []RateLimiterConfig{
		{SamplesPerInsert: 0, MinSizeToSample: 1, ErrorBuffer: 1},
		{SamplesPerInsert: math.Inf(1), MinSizeToSample: 1, ErrorBuffer: 1},
		{SamplesPerInsert: 1, MinSizeToSample: 0, ErrorBuffer: 1},
		{SamplesPerInsert: 4, MinSizeToSample: 1, ErrorBuffer: 3}, // < max(1, SPI)
		{SamplesPerInsert: 0.5, MinSizeToSample: 1, ErrorBuffer: 0.9},
		{SamplesPerInsert: 1, MinSizeToSample: 1, ErrorBuffer: 1, Timeout: -time.Second},
	} {
		if _, err := NewRateLimiter(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestRateLimiterSemantics walks Reverb's two stages with non-blocking
// probes: before MinSizeToSample only inserts pass; after it the balance
// (inserted - MinSize)·SPI - sampled stays within ±ErrorBuffer.
func TestRateLimiterSemantics(t *testing.T) {
	r, err := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 2, MinSizeToSample: 10, ErrorBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if r.CanSample() {
		t.Fatal("sampling allowed on an empty table")
	}
	for range 10 {
		if err := r.AwaitInsert(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	// Stage 2: error = (10-10)·2 - 0 = 0; samples pass while error-1 >= -4.
	n := 0
	for r.CanSample() {
		if err := r.AwaitSample(ctx, 1); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 4 {
		t.Fatalf("%d samples admitted with no new inserts, want 4 (the error buffer)", n)
	}
	// Inserts pass while error + SPI <= +4: error is -4 now, so 4 inserts.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	ins := 0
	for r.AwaitInsert(short, 1) == nil {
		ins++
	}
	if ins != 4 {
		t.Fatalf("%d inserts admitted, want 4 (from error -4 up to +4 in steps of 2)", ins)
	}
	st := r.Stats()
	if st.Inserted != 14 || st.Sampled != 4 || st.InsertWaits != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRateLimiterKeepsRatio runs a fast sampler and a fast inserter at once
// and checks that the balance never leaves the error buffer by more than a
// batch.
func TestRateLimiterKeepsRatio(t *testing.T) {
	cfg := RateLimiterConfig{SamplesPerInsert: 8, MinSizeToSample: 100, ErrorBuffer: 64}
	r, err := NewRateLimiter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	const insBatch, smpBatch = 5, 32
	var bad error
	var mu sync.Mutex
	check := func() {
		r.mu.Lock()
		e := float64(r.inserted-cfg.MinSizeToSample)*cfg.SamplesPerInsert - float64(r.sampled)
		inserted := r.inserted
		r.mu.Unlock()
		if inserted >= cfg.MinSizeToSample && (e > cfg.ErrorBuffer+insBatch*cfg.SamplesPerInsert || e < -cfg.ErrorBuffer-smpBatch) {
			mu.Lock()
			bad = errors.New("balance out of range")
			mu.Unlock()
		}
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			if r.AwaitInsert(ctx, insBatch) == nil {
				check()
			}
		}
	})
	wg.Go(func() {
		for i := 0; i < 2000; i++ {
			if err := r.AwaitSample(ctx, smpBatch); err != nil {
				return
			}
			check()
		}
		cancel()
	})
	wg.Wait()
	cancel()
	if bad != nil {
		t.Fatal(bad)
	}
	st := r.Stats()
	want := float64(st.Sampled) / cfg.SamplesPerInsert
	if got := float64(st.Inserted - cfg.MinSizeToSample); math.Abs(got-want) > (cfg.ErrorBuffer+smpBatch)/cfg.SamplesPerInsert+insBatch {
		t.Fatalf("inserted %v beyond min size for %v sampled: ratio off (want ~%v)", got, st.Sampled, want)
	}
	if st.SampleWaits == 0 {
		t.Fatal("the sampler never waited: the limiter did not limit")
	}
}

func TestRateLimiterCancelAndTimeout(t *testing.T) {
	r, _ := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 5, ErrorBuffer: 2})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.AwaitSample(ctx, 1) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait returned %v", err)
	}
	rt, _ := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 5, ErrorBuffer: 2, Timeout: 10 * time.Millisecond})
	if err := rt.AwaitSample(context.Background(), 1); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("timed-out wait returned %v, want ErrRateLimited", err)
	}
	if rt.Stats().Timeouts != 1 {
		t.Fatalf("stats %+v", rt.Stats())
	}
	if err := rt.AwaitInsert(context.Background(), 0); err == nil {
		t.Fatal("a batch of 0 items was accepted")
	}
}

// TestRateLimiterReserveCommit: reserved items count toward the ratio at
// once (a further insert past the error buffer waits) but let learning
// start only once committed; an aborted reservation leaves the balance as
// if never admitted; settling more than is reserved is refused.
func TestRateLimiterReserveCommit(t *testing.T) {
	ctx := context.Background()
	r, err := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 16, ErrorBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReserveInsert(ctx, 16); err != nil {
		t.Fatal(err)
	}
	if r.CanSample() {
		t.Fatal("a sample was admitted on 16 reserved items none of which is stored")
	}
	if err := r.CommitInsert(10); err != nil {
		t.Fatal(err)
	}
	if r.CanSample() {
		t.Fatal("a sample was admitted with 10 of the 16 items MinSizeToSample needs stored")
	}
	if err := r.CommitInsert(6); err != nil {
		t.Fatal(err)
	}
	if !r.CanSample() {
		t.Fatal("no sample admitted with 16 items stored")
	}
	if err := r.CommitInsert(1); err == nil {
		t.Fatal("committing an item never reserved was accepted")
	}
	if err := r.ReserveInsert(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if !r.CanSample() {
		t.Fatal("a pending reservation beyond MinSizeToSample blocked sampling")
	}
	if err := r.AbortInsert(4); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Inserted != 16 {
		t.Fatalf("after the abort Stats.Inserted = %d, want 16", st.Inserted)
	}
	if err := r.AbortInsert(1); err == nil {
		t.Fatal("aborting with nothing reserved was accepted")
	}
	// Woken waiters: a sampler blocked on uncommitted items proceeds on
	// the commit.
	r2, err := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 8, ErrorBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.ReserveInsert(ctx, 8); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		done <- r2.AwaitSample(c, 1)
	}()
	select {
	case err := <-done:
		t.Fatalf("AwaitSample returned (%v) before the reserved items were committed", err)
	case <-time.After(20 * time.Millisecond):
	}
	if err := r2.CommitInsert(8); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("AwaitSample after the commit: %v", err)
	}
}

// TestRateLimiterSetConfig: a new configuration is validated (an invalid
// one changes nothing), keeps the counts, and wakes a sampler the old
// bounds held.
func TestRateLimiterSetConfig(t *testing.T) {
	cfg := RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 2, ErrorBuffer: 1}
	r, err := NewRateLimiter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := r.AwaitInsert(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := r.AwaitSample(ctx, 1); err != nil { // error 0 → -1: at the bound
		t.Fatal(err)
	}
	if r.CanSample() {
		t.Fatal("a sample admitted beyond the error buffer")
	}
	if err := r.SetConfig(RateLimiterConfig{SamplesPerInsert: 4, MinSizeToSample: 1, ErrorBuffer: 1}); err == nil {
		t.Fatal("ErrorBuffer below SamplesPerInsert accepted")
	}
	if got := r.Config(); got != cfg {
		t.Fatalf("a refused SetConfig changed the config to %+v", got)
	}
	done := make(chan error, 1)
	go func() { done <- r.AwaitSample(ctx, 1) }()
	next := RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 2, ErrorBuffer: 3}
	if err := r.SetConfig(next); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil { // error -1 - 1 >= -3: admitted once woken
		t.Fatal(err)
	}
	if got := r.Config(); got != next {
		t.Fatalf("Config() = %+v, want %+v", got, next)
	}
	if st := r.Stats(); st.Inserted != 2 || st.Sampled != 2 {
		t.Fatalf("counts changed: %+v", st)
	}
}

// fakeClock is a limiter's clock that moves only when the test says.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// TestRateLimiterFleetLease: a fleet shard's limiter holds inserts on the
// fleet's counts while their lease runs; once it passes without a renewal
// the counts are stale and the inserts they hold are admitted while the
// balance is within the allowance past its bound, counted in StaleInserts
// and StaleItems. The allowance is spent across renewals (a renewal
// without samples gives none back; the learner's samples give back what
// they sampled), an aborted stale reservation gives its room back and is
// not counted, and counts without a lease never go stale. On a fake
// clock, so a loaded machine cannot let the lease pass early.
func TestRateLimiterFleetLease(t *testing.T) {
	r, err := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 4, ErrorBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{}
	r.now = clk.now
	ctx := context.Background()
	if err := r.RenewFleetCounts(-1, 0, time.Second, 1); err == nil {
		t.Fatal("negative fleet counts accepted")
	}
	const lease, allowance = time.Second, 10
	renew := func(sampled int64, lease time.Duration) {
		t.Helper()
		if err := r.RenewFleetCounts(0, sampled, lease, allowance); err != nil {
			t.Fatal(err)
		}
	}
	insert := func(n int) {
		t.Helper()
		if !r.CanInsert() {
			t.Fatalf("an insert of %d held (stats %+v)", n, r.Stats())
		}
		if err := r.AwaitInsert(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	held := func(what string) {
		t.Helper()
		if r.CanInsert() {
			t.Fatalf("%s: an insert admitted (stats %+v)", what, r.Stats())
		}
	}
	stale := func(what string, inserts, items int64) {
		t.Helper()
		if st := r.Stats(); st.StaleInserts != inserts || st.StaleItems != items {
			t.Fatalf("%s: %d stale inserts of %d items, want %d of %d (%+v)", what, st.StaleInserts, st.StaleItems, inserts, items, st)
		}
	}
	renew(0, lease)
	fresh := 0
	for r.CanInsert() {
		insert(1)
		fresh++
	}
	if fresh != 8 {
		t.Fatalf("%d inserts admitted on fresh counts, want 8 (balance up to +4 past MinSizeToSample's 4)", fresh)
	}
	clk.advance(lease - time.Millisecond)
	held("just before the lease's end")
	clk.advance(time.Millisecond)
	// Stale: admitted while the balance is within 10 items past the
	// bound, a batch when its first item fits.
	insert(4)
	insert(4)
	insert(4) // 2 items of room left: admitted, overshooting
	held("past the allowance")
	stale("the allowance spent", 3, 12)
	// A renewal without samples (a flapping link) gives nothing back.
	renew(0, lease)
	held("fresh counts again")
	clk.advance(lease)
	held("stale again, the allowance still spent")
	// The learner's samples give back what they sampled: 6 items.
	renew(6, lease)
	held("fresh counts after 6 samples")
	clk.advance(lease)
	insert(4)
	held("the 6 items' room spent")
	stale("after the samples' room", 4, 16)
	// An aborted stale reservation gives its room back, uncounted.
	renew(10, lease)
	clk.advance(lease)
	if err := r.ReserveInsert(ctx, 4); err != nil {
		t.Fatal(err)
	}
	held("a stale reservation pending")
	stale("a stale reservation pending", 5, 20)
	if err := r.AbortInsert(4); err != nil {
		t.Fatal(err)
	}
	stale("the stale reservation aborted", 4, 16)
	if err := r.ReserveInsert(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if err := r.CommitInsert(4); err != nil {
		t.Fatal(err)
	}
	stale("a stale reservation committed", 5, 20)
	if st := r.Stats(); st.Inserted != 28 {
		t.Fatalf("stats %+v, want 28 inserted", st)
	}
	// Counts without a lease never go stale.
	renew(11, 0)
	clk.advance(time.Hour)
	held("counts without a lease")
	// Samples that make room: admitted on the balance, not stale.
	renew(100, lease)
	insert(1)
	stale("an insert on fresh counts", 5, 20)
}

// TestRateLimiterFleetLeaseWakes: an insert held on fleet counts is woken
// when their lease passes and admitted on the stale counts (real clock:
// only a lower bound on the wait is asserted, which a loaded machine
// cannot break).
func TestRateLimiterFleetLeaseWakes(t *testing.T) {
	r, err := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 4, ErrorBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	const lease = 300 * time.Millisecond
	renewed := time.Now()
	if err := r.RenewFleetCounts(8, 0, lease, 10); err != nil { // the balance full: 8 inserted elsewhere
		t.Fatal(err)
	}
	if r.CanInsert() {
		t.Fatal("an insert admitted on a full balance")
	}
	if err := r.AwaitInsert(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(renewed); waited < lease || waited > lease+10*time.Second {
		t.Fatalf("the held insert was admitted %v after the renewal, want just past the %v lease", waited, lease)
	}
	if st := r.Stats(); st.StaleInserts != 1 || st.StaleItems != 4 || st.InsertWaits != 1 {
		t.Fatalf("stats %+v, want 1 stale insert of 4 items, after a wait", st)
	}
}
