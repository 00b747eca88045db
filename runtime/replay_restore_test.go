package runtime

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestReplayCoreSaveStriped: at rest, a striped checkpoint restores the
// core that Save would (the restored core's Save bytes equal the
// original's); taken while an inserter and a sampling, writing-back
// stage go on, it restores a core whose buffer passes its invariants and
// whose limiter counts no insert the buffer lacks.
func TestReplayCoreSaveStriped(t *testing.T) {
	cfg := splitConfig(7)
	cfg.Sampler = "ners"
	core, err := NewReplayCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fillCore(t, cfg, core, 150)
	var want, striped bytes.Buffer
	if err := core.Save(&want); err != nil {
		t.Fatal(err)
	}
	if err := core.SaveStriped(&striped, nil); err != nil {
		t.Fatal(err)
	}
	re, err := LoadReplayCore(cfg, bytes.NewReader(striped.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := re.Save(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want.Bytes(), got.Bytes()) {
		t.Fatal("a core restored from SaveStriped saves other bytes than the original")
	}
	if n := re.RestoreNotes(); n != nil {
		t.Fatalf("an unchanged restore left notes: %q", n)
	}

	// In use: an inserter through the limiter, a stage sampling and
	// writing back under the caller's stage lock.
	var (
		stage sync.Mutex
		stop  atomic.Bool
		wg    sync.WaitGroup
		errs  = make(chan error, 2)
	)
	src := core.Buffer()
	bt, err := src.NewBatch(32)
	if err != nil {
		t.Fatal(err)
	}
	rows := min(64, src.Size())
	if err := src.SampleUniform(rand.New(rand.NewPCG(1, 1)), bt); err != nil {
		t.Fatal(err)
	}
	tr := bt.Transitions
	tr.Priority = nil
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load() && i < 100_000; i++ {
			if err := core.Insert(ctx, &tr); err != nil {
				if ctx.Err() == nil {
					errs <- err
				}
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(2, 2))
		b, _ := src.NewBatch(rows)
		for i := 0; !stop.Load() && i < 100_000; i++ {
			if err := core.Limiter().AwaitSample(ctx, rows); err != nil {
				if ctx.Err() == nil {
					errs <- err
				}
				return
			}
			stage.Lock()
			err := src.SampleUniform(rng, b)
			if err == nil {
				p := make([]float64, rows)
				for j := range p {
					p[j] = rng.Float64()
				}
				_, err = src.UpdatePriorities(b.Refs, p)
			}
			stage.Unlock()
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	for range 5 {
		var ck bytes.Buffer
		if err := core.SaveStriped(&ck, &stage); err != nil {
			t.Fatal(err)
		}
		re, err := LoadReplayCore(cfg, bytes.NewReader(ck.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if err := re.Buffer().CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		if s := re.limiter.snapshot(); uint64(s.inserted) > re.Buffer().Stats().Inserts {
			t.Fatalf("restored limiter counts %d inserts, the buffer %d", s.inserted, re.Buffer().Stats().Inserts)
		}
	}
	stop.Store(true)
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestRestoreLimiterConflict: a checkpoint whose limiter configuration
// differs from the one asked for is refused, naming both, unless
// LimiterFrom says which wins; the winner is then in force, and a bad
// LimiterFrom is refused.
func TestRestoreLimiterConflict(t *testing.T) {
	cfg := splitConfig(7)
	core, err := NewReplayCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fillCore(t, cfg, core, 50)
	flags := core.Limiter().Config()
	changed := flags
	changed.SamplesPerInsert, changed.ErrorBuffer = 2*flags.SamplesPerInsert+1, 3*flags.ErrorBuffer
	if err := core.Limiter().SetConfig(changed); err != nil {
		t.Fatal(err)
	}
	var ck bytes.Buffer
	if err := core.SaveStriped(&ck, nil); err != nil {
		t.Fatal(err)
	}
	_, err = LoadReplayCore(cfg, bytes.NewReader(ck.Bytes()))
	if !errors.Is(err, ErrLimiterConflict) || !errors.Is(err, ErrResumeConflict) {
		t.Fatalf("a different limiter: %v, want ErrLimiterConflict", err)
	}
	for _, want := range []string{limiterOf(changed).String(), limiterOf(flags).String(), "-limiter-from"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the refusal %q does not name %q", err, want)
		}
	}
	for from, want := range map[string]RateLimiterConfig{LimiterFromCheckpoint: changed, LimiterFromFlags: flags} {
		re, err := LoadReplayCoreWith(cfg, bytes.NewReader(ck.Bytes()), RestoreOptions{LimiterFrom: from})
		if err != nil {
			t.Fatalf("LimiterFrom %s: %v", from, err)
		}
		if got := re.Limiter().Config(); got != want {
			t.Fatalf("LimiterFrom %s: limiter %+v, want %+v", from, got, want)
		}
		if n := re.RestoreNotes(); len(n) == 0 || !strings.Contains(n[0], "wins") {
			t.Fatalf("LimiterFrom %s: notes %q", from, n)
		}
		if !re.Limiter().CanInsert() || !re.Limiter().CanSample() {
			t.Fatalf("LimiterFrom %s: restored limiter admits insert %v, sample %v (balance %+v)", from,
				re.Limiter().CanInsert(), re.Limiter().CanSample(), re.limiter.snapshot())
		}
	}
	// Asked for the checkpoint's own configuration: no conflict.
	if _, err := LoadReplayCoreWith(cfg, bytes.NewReader(ck.Bytes()), RestoreOptions{Limiter: &changed}); err != nil {
		t.Fatalf("the same limiter: %v", err)
	}
	if _, err := LoadReplayCoreWith(cfg, bytes.NewReader(ck.Bytes()), RestoreOptions{LimiterFrom: "both"}); err == nil || !strings.Contains(err.Error(), `"both"`) {
		t.Fatalf("LimiterFrom both: %v", err)
	}
}

// TestRestoreNeverDeadlocks: a checkpoint whose limiter counts more
// inserts than its buffer holds, or whose balance lies outside the band
// of the configuration in force, restores to a limiter that admits both
// an insert and a sample, with inserted at most the buffer's inserts.
func TestRestoreNeverDeadlocks(t *testing.T) {
	cfg := splitConfig(7)
	core, err := NewReplayCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fillCore(t, cfg, core, 50)
	stored := int64(core.Buffer().Stats().Inserts)
	for _, c := range []struct {
		name              string
		inserted, sampled int64
	}{
		{"inserts the buffer lacks", 100 * stored, 0},
		{"learner far behind", stored, 0},
		{"learner far ahead", stored, 1_000_000},
	} {
		core.limiter.restore(c.inserted, c.sampled)
		var ck bytes.Buffer
		if err := core.SaveStriped(&ck, nil); err != nil {
			t.Fatal(err)
		}
		re, err := LoadReplayCore(cfg, bytes.NewReader(ck.Bytes()))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		s := re.limiter.snapshot()
		if s.inserted > stored || !re.Limiter().CanInsert() || !re.Limiter().CanSample() {
			t.Fatalf("%s: restored balance %+v (buffer inserts %d): insert %v, sample %v", c.name, s, stored,
				re.Limiter().CanInsert(), re.Limiter().CanSample())
		}
		if len(re.RestoreNotes()) == 0 {
			t.Fatalf("%s: the adjustment left no note", c.name)
		}
	}
}

// TestConsistentBalance: over ratios below and above 1 and counts on
// either side of the band, the balance a restore gives admits an insert
// and a sample once MinSizeToSample items are stored, never counts more
// inserts than stored, and leaves a balance inside the band as it is.
func TestConsistentBalance(t *testing.T) {
	for _, cfg := range []RateLimiterConfig{
		{SamplesPerInsert: 0.25, MinSizeToSample: 100, ErrorBuffer: 64},
		{SamplesPerInsert: 1, MinSizeToSample: 1, ErrorBuffer: 1},
		{SamplesPerInsert: 8, MinSizeToSample: 500, ErrorBuffer: 512},
	} {
		for _, c := range [][3]int64{{1000, 0, 1000}, {1000, 1e9, 1000}, {1e6, 0, 2000}, {600, 800, 5000}, {50, 1e6, 50}} {
			ins, smp, _ := consistentBalance(cfg, c[0], c[1], c[2])
			if ins > c[2] || smp < 0 {
				t.Fatalf("%+v %v: inserted %d sampled %d", cfg, c, ins, smp)
			}
			r, err := NewRateLimiter(cfg)
			if err != nil {
				t.Fatal(err)
			}
			r.restore(ins, smp)
			if !r.CanInsert() || (ins >= cfg.MinSizeToSample && !r.CanSample()) {
				t.Fatalf("%+v %v: restored (%d, %d) admits insert %v sample %v", cfg, c, ins, smp, r.CanInsert(), r.CanSample())
			}
			if again, smp2, note2 := consistentBalance(cfg, ins, smp, c[2]); again != ins || smp2 != smp || note2 != "" {
				t.Fatalf("%+v: an admitted balance (%d, %d) moved to (%d, %d): %s", cfg, ins, smp, again, smp2, note2)
			}
		}
	}
}

// TestConsistentBalanceNarrowBand: a band under 1 wide (SamplesPerInsert
// 0.9, ErrorBuffer 1) holds no whole sample count for 2 inserts: the
// restore admits the side the checkpoint's balance blocked, and one call
// of that side opens the other.
func TestConsistentBalanceNarrowBand(t *testing.T) {
	cfg := RateLimiterConfig{SamplesPerInsert: 0.9, MinSizeToSample: 1, ErrorBuffer: 1}
	for _, c := range []struct {
		sampled    int64
		wantInsert bool // else a sample is admitted
	}{{0, true}, {100, false}} {
		ins, smp, note := consistentBalance(cfg, 2, c.sampled, 2)
		r, err := NewRateLimiter(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r.restore(ins, smp)
		if r.CanInsert() && r.CanSample() {
			t.Fatalf("sampled %d: restored (%d, %d) admits both: the band is not narrow, the test is wrong", c.sampled, ins, smp)
		}
		if note == "" {
			t.Errorf("sampled %d: restored (%d, %d) without a note", c.sampled, ins, smp)
		}
		if c.wantInsert {
			if !r.CanInsert() {
				t.Fatalf("too few samples: restored (%d, %d) admits no insert", ins, smp)
			}
			r.restore(ins+1, smp)
			if !r.CanSample() {
				t.Errorf("too few samples: after an insert (%d, %d) admits no sample", ins+1, smp)
			}
		} else {
			if !r.CanSample() {
				t.Fatalf("too many samples: restored (%d, %d) admits no sample", ins, smp)
			}
			r.restore(ins, smp+1)
			if !r.CanInsert() {
				t.Errorf("too many samples: after a sample (%d, %d) admits no insert", ins, smp+1)
			}
		}
	}
}
