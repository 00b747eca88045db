package learner

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// probeStage is a uniform stage that records what the learner's replay
// step hands it: the refs each Sample filled and the |δ| of each Update,
// to which it answers with a fixed result (one write-back stale).
type probeStage struct {
	sampler.Selector
	samples int
	refs    [][]buffer.Ref // per Sample
	updates [][]float64    // per Update: |δ|
}

func (p *probeStage) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	if err := p.Selector.Sample(rng, dst); err != nil {
		return err
	}
	p.samples++
	p.refs = append(p.refs, slices.Clone(dst.Refs))
	return nil
}

func (p *probeStage) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	if !slices.Equal(refs, p.refs[len(p.refs)-1]) {
		return buffer.UpdateResult{}, errorf(ErrConfig, "Update's refs are not the last batch's")
	}
	p.updates = append(p.updates, slices.Clone(absTD))
	return buffer.UpdateResult{Applied: len(refs) - 1, Stale: 1}, nil
}

// probeWeights gives row i the weight 1 + i/8 (times scale), recording the
// steps it was asked for.
type probeWeights struct {
	scale float64
	steps []int64
}

func (w *probeWeights) Weights(b *buffer.Batch, step int64) error {
	w.steps = append(w.steps, step)
	for i := range b.Weight {
		b.Weight[i] = (1 + float64(i)/8) * w.scale
	}
	return nil
}

// probeScale is a Normalizer returning a fixed scale, recording the |δ| it
// was given.
type probeScale struct {
	c     float64
	absTD [][]float64
}

func (n *probeScale) Scale(absTD []float64) (float64, error) {
	n.absTD = append(n.absTD, slices.Clone(absTD))
	return n.c, nil
}

// TestSharedReplayStep pins the replay step DQN, TD3 and SAC share: each
// Step samples once, takes the Weighter's weights at step−1, multiplies
// them by the Normalizer's scale of the very |δ| it then writes back to
// the sampled refs, and counts the step (write-backs applied and stale,
// mean |δ|, sampled moments, timing). The loss must see exactly w·c: a
// learner whose Weighter hands over w·c itself, without a Normalizer,
// ends bit-identical.
func TestSharedReplayStep(t *testing.T) {
	const batch, steps = 8, 3
	type learnerStats struct {
		steps, writeBacks, stale uint64
		meanAbsTD                float64
		sampled                  Moments
		timing                   Timing
	}
	type run struct {
		step   func() error
		params func() []float64
		stats  func() learnerStats
	}
	kinds := []struct {
		name string
		make func(t *testing.T, m func(*buffer.Buffer) sampler.Method) run
	}{
		{"dqn", func(t *testing.T, m func(*buffer.Buffer) sampler.Method) run {
			rng := rand.New(rand.NewPCG(7, 7))
			net, err := model.NewNet(model.Config{In: 4, Hidden: []int{8}, Out: 2}, rng)
			if err != nil {
				t.Fatal(err)
			}
			buf := newBuffer(t, 256, 4)
			fillRandom(t, buf, rng, 256, 4, 2)
			l, err := NewDQN(DQNConfig{Batch: batch, Seed: 3}, net, buf, m(buf), nil)
			if err != nil {
				t.Fatal(err)
			}
			return run{func() error { return l.Step(ctx) }, func() []float64 { return params(l.Net()) }, func() learnerStats {
				s := l.Stats()
				return learnerStats{s.Steps, s.WriteBacks, s.StaleWriteBacks, s.MeanAbsTD, s.Sampled, s.Timing}
			}}
		}},
		{"td3", func(t *testing.T, m func(*buffer.Buffer) sampler.Method) run {
			buf := contBuffer(t, 256, 3, 2, 0)
			fillContinuous(t, buf, rand.New(rand.NewPCG(11, 11)), 256, rigMaxA)
			actor, critic := td3Nets(t, 3, 2, []int{8}, model.ReLU, 5)
			l, err := NewTD3(TD3Config{Batch: batch, MaxAction: rigMaxA, PolicyDelay: 2, Seed: 3}, actor, critic, buf, m(buf), nil)
			if err != nil {
				t.Fatal(err)
			}
			return run{func() error { return l.Step(ctx) }, func() []float64 {
				return slices.Concat(params(l.Actor()), params(l.Critics()[0]), params(l.Critics()[1]))
			}, func() learnerStats {
				s := l.Stats()
				return learnerStats{s.Steps, s.WriteBacks, s.StaleWriteBacks, s.MeanAbsTD, s.Sampled, s.Timing}
			}}
		}},
		{"sac", func(t *testing.T, m func(*buffer.Buffer) sampler.Method) run {
			buf := contBuffer(t, 256, 3, 2, 0)
			fillContinuous(t, buf, rand.New(rand.NewPCG(11, 11)), 256, rigMaxA)
			policy, critic := sacNets(t, 3, 2, []int{8}, model.ReLU, 5)
			l, err := NewSAC(SACConfig{Batch: batch, MaxAction: rigMaxA, Seed: 3}, policy, critic, buf, m(buf), nil)
			if err != nil {
				t.Fatal(err)
			}
			return run{func() error { return l.Step(ctx) }, func() []float64 {
				return slices.Concat(params(l.Policy()), params(l.Critics()[0]), params(l.Critics()[1]))
			}, func() learnerStats {
				s := l.Stats()
				return learnerStats{s.Steps, s.WriteBacks, s.StaleWriteBacks, s.MeanAbsTD, s.Sampled, s.Timing}
			}}
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			const c = 0.375 // both learners compute (1 + i/8)·c
			stage, weights, norm := &probeStage{}, &probeWeights{scale: 1}, &probeScale{c: c}
			a := k.make(t, func(buf *buffer.Buffer) sampler.Method {
				stage.Selector = sampler.NewUniform(buf)
				return sampler.Method{Name: "probe", Selector: stage, Weighter: weights, Normalizer: norm, Loss: model.Loss{Kind: model.MSE}}
			})
			// The twin: weights w·c from its Weighter, no Normalizer.
			twin := &probeStage{}
			b := k.make(t, func(buf *buffer.Buffer) sampler.Method {
				twin.Selector = sampler.NewUniform(buf)
				return sampler.Method{Name: "twin", Selector: twin, Weighter: &probeWeights{scale: c}, Loss: model.Loss{Kind: model.MSE}}
			})
			var sumTD float64
			var n uint64
			for s := range steps {
				if err := a.step(); err != nil {
					t.Fatal(err)
				}
				if err := b.step(); err != nil {
					t.Fatal(err)
				}
				if stage.samples != s+1 || len(stage.updates) != s+1 || len(norm.absTD) != s+1 {
					t.Fatalf("step %d: %d samples, %d updates, %d scales; want one each", s+1, stage.samples, len(stage.updates), len(norm.absTD))
				}
				td := stage.updates[s]
				if !slices.Equal(td, norm.absTD[s]) {
					t.Fatalf("step %d: the Normalizer saw |δ| %v, the write-back %v", s+1, norm.absTD[s], td)
				}
				if !slices.Equal(td, twin.updates[s]) {
					t.Fatalf("step %d: |δ| %v, the twin's %v: the loss did not see w·c", s+1, td, twin.updates[s])
				}
				var sum float64
				for _, d := range td {
					if !(d >= 0) {
						t.Fatalf("step %d: |δ| %v", s+1, td)
					}
					sum += d
					sumTD += d
				}
				n += batch
				st := a.stats()
				if st.steps != uint64(s+1) || st.writeBacks != uint64(s+1)*(batch-1) || st.stale != uint64(s+1) ||
					st.meanAbsTD != sum/batch || st.sampled.N != n || math.Abs(st.sampled.SumTD-sumTD) > 1e-12*sumTD ||
					st.timing.Sample < 0 || st.timing.WriteBack < 0 || st.timing.Sample+st.timing.WriteBack > st.timing.Steps {
					t.Fatalf("step %d: counters %+v (sum |δ| %v over %d rows)", s+1, st, sum, n)
				}
			}
			if !slices.Equal(weights.steps, []int64{0, 1, 2}) {
				t.Fatalf("the Weighter was asked for steps %v, want 0, 1, 2 (step − 1)", weights.steps)
			}
			if !slices.Equal(a.params(), b.params()) {
				t.Fatal("the Normalizer's scale and a Weighter's w·c gave different parameters")
			}
		})
	}
}
