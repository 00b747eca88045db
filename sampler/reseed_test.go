package sampler_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// TestReseedConformance: a Reseeder over PER is still a conforming
// Selector.
func TestReseedConformance(t *testing.T) {
	samplertest.Run(t, func(t *testing.T, buf *buffer.Buffer) sampler.Selector {
		s, err := sampler.NewPER(buf, sampler.DefaultPERConfig(1000))
		if err != nil {
			t.Fatal(err)
		}
		return sampler.Reseed(s)
	}, samplertest.Options{})
}

// TestReseedDrawsOneSeed: Sample consumes exactly one Uint64 of the
// caller's generator and draws what SampleSeed draws with it, on another
// Reseeder over another stage of the same state (a server's), whatever
// the caller's generator does next.
func TestReseedDrawsOneSeed(t *testing.T) {
	const seed, n = 0x5eed17, 64
	newStage := func() (*buffer.Buffer, sampler.Selector) {
		buf := samplertest.NewBuffer(t, n)
		prio := make([]float64, n)
		for i := range prio {
			prio[i] = float64(1 + i%7)
		}
		samplertest.Insert(t, buf, 0, n, prio)
		s, err := sampler.NewPER(buf, sampler.DefaultPERConfig(1000))
		if err != nil {
			t.Fatal(err)
		}
		return buf, s
	}
	bufA, stageA := newStage()
	bufB, stageB := newStage()
	local, remote := sampler.Reseed(stageA), sampler.Reseed(stageB)
	if sampler.Reseed(local) != local || sampler.Unwrapped(local) != stageA || local.Unwrap() != stageA {
		t.Fatal("Reseed of a Reseeder must be itself, and unwrap to its stage")
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	twin := rand.New(rand.NewPCG(seed, 1))
	a, b := samplertest.NewBatch(t, bufA, 16), samplertest.NewBatch(t, bufB, 16)
	for round := range 20 {
		if err := local.Sample(rng, a); err != nil {
			t.Fatal(err)
		}
		if err := remote.SampleSeed(twin.Uint64(), b); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Refs, b.Refs) || !slices.Equal(a.Prob, b.Prob) || !slices.Equal(a.Reward, b.Reward) {
			t.Fatalf("seed %#x round %d: the local and the seeded draws differ: %v vs %v", seed, round, a.Refs, b.Refs)
		}
		if rng.Uint64() != twin.Uint64() { // both generators advanced by one draw per Sample
			t.Fatalf("seed %#x round %d: Sample consumed other than one Uint64", seed, round)
		}
		td := make([]float64, 16)
		for i := range td {
			td[i] = float64(round+i) / 8
		}
		if _, err := local.Update(a.Refs, td); err != nil {
			t.Fatal(err)
		}
		if _, err := remote.Update(b.Refs, td); err != nil {
			t.Fatal(err)
		}
	}
	if local.Priority(0.5) != stageA.Priority(0.5) || local.String() != stageA.String() {
		t.Error("Priority and String must pass through")
	}
	if err := local.Sample(nil, a); err == nil {
		t.Error("a nil generator was accepted")
	}
	if sampler.Reseed(nil) != nil {
		t.Error("Reseed(nil) must be nil")
	}
}

// TestReseedAllocatesNothing: a learner step's sampling stays
// allocation-free through the wrapper.
func TestReseedAllocatesNothing(t *testing.T) {
	buf := samplertest.NewBuffer(t, 64)
	samplertest.Insert(t, buf, 0, 64, nil)
	s := sampler.Reseed(sampler.NewUniform(buf))
	rng := rand.New(rand.NewPCG(3, 4))
	b := samplertest.NewBatch(t, buf, 8)
	if allocs := testing.AllocsPerRun(100, func() {
		if err := s.Sample(rng, b); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("Sample allocates %v times per call", allocs)
	}
}
