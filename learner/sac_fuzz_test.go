package learner

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/model"
)

// fuzzSAC is a small SAC (3 observations, 2 actions, 4-unit networks over
// 64 random transitions, uniform MSE) with networks from netSeed, after
// three steps.
func fuzzSAC(tb testing.TB, netSeed uint64) *SAC {
	tb.Helper()
	buf := contBuffer(tb, 64, 3, 2, 0)
	fillContinuous(tb, buf, rand.New(rand.NewPCG(2, 2)), 64, rigMaxA)
	policy, critic := sacNets(tb, 3, 2, []int{4}, model.ReLU, netSeed)
	l, err := NewSAC(SACConfig{Batch: 8, MaxAction: rigMaxA, Seed: 4}, policy, critic, buf, td3Method(tb, "uniform", buf, nil), nil)
	if err != nil {
		tb.Fatal(err)
	}
	sacSteps(tb, l, 3)
	return l
}

// FuzzSACLoad: SAC.Load on arbitrary bytes (seeded with a real checkpoint
// and edits of it, checksums optionally recomputed) never panics, never
// allocates far beyond its input, refuses with ErrCorrupt or ErrMismatch
// and leaves the learner unchanged, or loads a state that Save writes back
// and Load takes again.
func FuzzSACLoad(f *testing.F) {
	var ck bytes.Buffer
	if err := fuzzSAC(f, 1).Save(&ck); err != nil {
		f.Fatal(err)
	}
	addSeeds(f, ck.Bytes())
	f.Add(bytes.Replace(ck.Bytes(), []byte(`"log_alpha":`), []byte(`"log_alpha":9`), 1), true)
	target := fuzzSAC(f, 9)
	if err := target.Load(bytes.NewReader(ck.Bytes())); err != nil {
		f.Fatalf("the real checkpoint does not load: %v", err)
	}
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = fixFrames(data)
		}
		checkLoad(t, data, func(b *bytes.Buffer) error { return target.Save(b) },
			func(d []byte) error { return target.Load(bytes.NewReader(d)) })
	})
}
