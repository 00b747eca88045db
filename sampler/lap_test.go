package sampler_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

func newLAP(t testing.TB, buf *buffer.Buffer, cfg sampler.LAPConfig) *sampler.LAP {
	t.Helper()
	l, err := sampler.NewLAP(buf, cfg)
	if err != nil {
		t.Fatalf("NewLAP: %v", err)
	}
	return l
}

func TestLAPConformance(t *testing.T) {
	samplertest.Run(t, func(t *testing.T, buf *buffer.Buffer) sampler.Selector {
		return newLAP(t, buf, sampler.DefaultLAPConfig())
	}, samplertest.Options{PriorityBased: true})
}

func TestPALConformance(t *testing.T) {
	samplertest.Run(t, func(t *testing.T, buf *buffer.Buffer) sampler.Selector {
		p, err := sampler.NewPAL(buf, sampler.LAPConfig{Alpha: 0.6, K: 0.01})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}, samplertest.Options{Seed: 0x9a1})
}

// TestLAPPriorities checks Eq. 9 on write-back and on actor-computed
// priorities, the floor K^Alpha on every leaf, and that the running
// maximum (the priority of new items) never decreases.
func TestLAPPriorities(t *testing.T) {
	const seed = 0x1a9
	for _, cfg := range []sampler.LAPConfig{{Alpha: 0.4, K: 1}, {Alpha: 0.6, K: 0.01}, {Alpha: 1, K: 1}, {Alpha: 0, K: 1}} {
		buf := samplertest.NewBuffer(t, 64)
		l := newLAP(t, buf, cfg)
		rng := rand.New(rand.NewPCG(seed, 1))
		floor := math.Pow(cfg.K, cfg.Alpha)
		prevMax := buf.MaxPriority()
		b := samplertest.NewBatch(t, buf, 16)
		for round := range 40 {
			samplertest.Insert(t, buf, round*16, 16, nil) // max-seen priority
			if err := l.Sample(rng, b); err != nil {
				t.Fatalf("seed %#x: %v", seed, err)
			}
			absTD := make([]float64, b.Len())
			for i := range absTD {
				// Heavy-tailed errors, many below K.
				absTD[i] = cfg.K * math.Exp(3*rng.NormFloat64()-1)
			}
			if _, err := l.Update(b.Refs, absTD); err != nil {
				t.Fatalf("seed %#x: %v", seed, err)
			}
			for i, r := range b.Refs {
				ref, p, ok := buf.SlotPriority(int(r.Slot))
				if !ok || ref != r {
					continue // a duplicate row or a later write-back in the batch decides
				}
				want := math.Pow(math.Max(absTD[i], cfg.K), cfg.Alpha)
				want = math.Min(want, buf.Config().MaxPriority) // clamped and counted
				if last := lastIndex(b.Refs, r); last != i {
					continue
				}
				if math.Abs(p-want) > buf.Resolution()+1e-9*want {
					t.Fatalf("%+v seed %#x: slot %d priority %v, want max(%v, K)^alpha = %v", cfg, seed, r.Slot, p, absTD[i], want)
				}
			}
			for s := range buf.Capacity() {
				if _, p, ok := buf.SlotPriority(s); ok && p < floor-buf.Resolution() {
					t.Fatalf("%+v seed %#x: slot %d priority %v below the floor %v", cfg, seed, s, p, floor)
				}
			}
			m := buf.MaxPriority()
			if m < prevMax {
				t.Fatalf("%+v seed %#x: max priority fell from %v to %v", cfg, seed, prevMax, m)
			}
			prevMax = m
		}
		if got, want := l.Priority(0.5*cfg.K), floor; math.Abs(got-want) > 1e-15 {
			t.Errorf("%+v: Priority(K/2) = %v, want K^alpha %v", cfg, got, want)
		}
		if got := l.Priority(-1); got != buf.MaxPriority() {
			t.Errorf("%+v: Priority(-1) = %v, want the max %v", cfg, got, buf.MaxPriority())
		}
	}
}

func lastIndex(refs []buffer.Ref, r buffer.Ref) int {
	last := -1
	for i, x := range refs {
		if x == r {
			last = i
		}
	}
	return last
}

func TestLAPConfigErrors(t *testing.T) {
	buf := samplertest.NewBuffer(t, 8)
	for name, cfg := range map[string]sampler.LAPConfig{
		"negative alpha": {Alpha: -1, K: 1},
		"NaN alpha":      {Alpha: math.NaN(), K: 1},
		"zero K":         {Alpha: 0.4},
		"infinite K":     {Alpha: 0.4, K: math.Inf(1)},
		// The buffer's initial priority 1 is below 2^0.4.
		"floor above the initial priority": {Alpha: 0.4, K: 2},
	} {
		if _, err := sampler.NewLAP(buf, cfg); !errors.Is(err, buffer.ErrConfig) {
			t.Errorf("%s: NewLAP error %v, want ErrConfig", name, err)
		}
	}
	if _, err := sampler.NewLAP(nil, sampler.DefaultLAPConfig()); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("nil buffer: %v", err)
	}
	l := newLAP(t, buf, sampler.DefaultLAPConfig())
	samplertest.Insert(t, buf, 0, 4, nil)
	b := samplertest.NewBatch(t, buf, 2)
	if err := l.Sample(rand.New(rand.NewPCG(1, 2)), b); err != nil {
		t.Fatal(err)
	}
	for name, td := range map[string][]float64{"NaN": {1, math.NaN()}, "negative": {-1, 1}, "Inf": {math.Inf(1), 0}, "length": {1}} {
		before := buf.TotalPriority()
		if _, err := l.Update(b.Refs, td); err == nil {
			t.Errorf("%s: Update accepted %v", name, td)
		}
		if buf.TotalPriority() != before {
			t.Errorf("%s: a rejected Update changed the buffer", name)
		}
	}
}

func TestPALScale(t *testing.T) {
	p, err := sampler.NewPAL(samplertest.NewBuffer(t, 8), sampler.LAPConfig{Alpha: 0.5, K: 1})
	if err != nil {
		t.Fatal(err)
	}
	// max(|δ|,1)^0.5 = 1, 1, 2, 3: mean 7/4.
	s, err := p.Scale([]float64{0, 0.5, 4, 9})
	if err != nil || math.Abs(s-4.0/7) > 1e-15 {
		t.Errorf("Scale = %v, %v; want 4/7", s, err)
	}
	for name, td := range map[string][]float64{"empty": {}, "NaN": {math.NaN()}, "negative": {-1}, "Inf": {math.Inf(1)}} {
		if _, err := p.Scale(td); err == nil {
			t.Errorf("%s: Scale accepted %v", name, td)
		}
	}
	if p.Priority(123) != 1 {
		t.Error("PAL must store uniform priorities")
	}
}

// TestLAPUpdateOverflowingPriorities writes back TD errors whose priority
// max(|δ|, K)^α overflows float64 (α = 2, |δ| = 1e160): the update must
// succeed with those priorities clamped, as one row at a time would, not
// fail on a NaN from the vectorized power (whose output is its input).
func TestLAPUpdateOverflowingPriorities(t *testing.T) {
	const seed = 0x1b0
	buf := samplertest.NewBuffer(t, 64)
	l := newLAP(t, buf, sampler.LAPConfig{Alpha: 2, K: 1})
	samplertest.Insert(t, buf, 0, 16, nil)
	b := samplertest.NewBatch(t, buf, 8)
	if err := l.Sample(rand.New(rand.NewPCG(seed, 1)), b); err != nil {
		t.Fatalf("seed %#x: %v", seed, err)
	}
	absTD := []float64{1e160, 2, 3, 4, 1e200, 0.5, 6, 7}
	res, err := l.Update(b.Refs, absTD)
	if err != nil {
		t.Fatalf("seed %#x: Update with overflowing priorities: %v", seed, err)
	}
	if res.Applied == 0 {
		t.Fatalf("seed %#x: nothing applied: %+v", seed, res)
	}
	if got := l.Priority(1e160); got != math.MaxFloat64 && !math.IsInf(got, 1) {
		t.Errorf("Priority(1e160) = %v, want the largest float64 (clamped by the buffer)", got)
	}
}
