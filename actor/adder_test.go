package actor

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
)

func obs1(v float32) []float32 { return []float32{v} }

func TestNStepHandWorked(t *testing.T) {
	// n = 3, gamma = 0.5, rewards 1, 2, 4, 8, then termination.
	a, err := NewNStep(3, 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AddFirst(7, obs1(0)); err != nil {
		t.Fatal(err)
	}
	rewards := []float64{1, 2, 4, 8}
	for i, r := range rewards {
		if err := a.Add(int32(i), r, obs1(float32(i+1)), i == 3, false); err != nil {
			t.Fatal(err)
		}
	}
	o := &a.Out
	want := []struct {
		obs, next, ret, disc float32
		flags                uint32
	}{
		{0, 3, 1 + 1 + 1, 0.125, 0},               // 1 + .5·2 + .25·4, bootstrap s_3 with .5^3
		{1, 4, 2 + 2 + 0, 0, buffer.FlagTerminal}, // 2 + .5·4 + .25·8 = 6, terminal
		{2, 4, 4 + 4, 0, buffer.FlagTerminal},     // 4 + .5·8
		{3, 4, 8, 0, buffer.FlagTerminal},
	}
	want[1].ret = 6
	if o.Len() != len(want) {
		t.Fatalf("%d transitions, want %d", o.Len(), len(want))
	}
	for i, w := range want {
		if o.Obs[i] != w.obs || o.NextObs[i] != w.next || o.Reward[i] != w.ret || o.Discount[i] != w.disc || o.Flags[i] != w.flags || o.Action[i] != int32(i) {
			t.Fatalf("transition %d: obs %v next %v R %v disc %v flags %v action %v; want %+v",
				i, o.Obs[i], o.NextObs[i], o.Reward[i], o.Discount[i], o.Flags[i], o.Action[i], w)
		}
		if o.EpisodeID[i] != 7 || o.EpisodeStep[i] != int32(i) {
			t.Fatalf("transition %d: episode %d step %d", i, o.EpisodeID[i], o.EpisodeStep[i])
		}
	}
	if err := a.Add(0, 1, obs1(0), false, false); !errors.Is(err, ErrNoEpisode) {
		t.Fatalf("Add after the episode ended: %v, want ErrNoEpisode", err)
	}
}

func TestNStepTruncationBootstraps(t *testing.T) {
	a, _ := NewNStep(3, 0.9, 1)
	_ = a.AddFirst(1, obs1(0))
	_ = a.Add(0, 1, obs1(1), false, false)
	_ = a.Add(0, 1, obs1(2), false, true) // time limit after two steps
	o := &a.Out
	if o.Len() != 2 {
		t.Fatalf("%d transitions, want 2", o.Len())
	}
	if o.Reward[0] != float32(1+0.9) || o.Discount[0] != float32(0.9*0.9) || o.NextObs[0] != 2 || o.Flags[0] != buffer.FlagTruncated {
		t.Fatalf("first: R %v disc %v next %v flags %v", o.Reward[0], o.Discount[0], o.NextObs[0], o.Flags[0])
	}
	if o.Reward[1] != 1 || o.Discount[1] != float32(0.9) || o.NextObs[1] != 2 {
		t.Fatalf("second: R %v disc %v next %v", o.Reward[1], o.Discount[1], o.NextObs[1])
	}
}

// TestNStepMatchesReference compares random episodes with the definition
// computed directly from the whole episode.
func TestNStepMatchesReference(t *testing.T) {
	const seed = 17
	rng := rand.New(rand.NewPCG(seed, 0))
	for it := range 300 {
		n := 1 + rng.IntN(5)
		gamma := []float64{0, 0.5, 0.99, 1}[rng.IntN(4)]
		T := 1 + rng.IntN(12) // steps in the episode
		term := rng.IntN(2) == 0
		a, err := NewNStep(n, gamma, 2)
		if err != nil {
			t.Fatal(err)
		}
		states := make([][]float32, T+1)
		for i := range states {
			states[i] = []float32{float32(i), float32(-i)}
		}
		rew := make([]float64, T)
		_ = a.AddFirst(uint64(it), states[0])
		for i := range T {
			rew[i] = rng.NormFloat64()
			if err := a.Add(int32(i%3), rew[i], states[i+1], term && i == T-1, !term && i == T-1); err != nil {
				t.Fatal(err)
			}
		}
		o := &a.Out
		if o.Len() != T {
			t.Fatalf("seed %d it %d: %d transitions for %d steps", seed, it, o.Len(), T)
		}
		for s := range T {
			m := min(n, T-s)
			var ret float64
			for k := range m {
				ret += math.Pow(gamma, float64(k)) * rew[s+k]
			}
			disc := math.Pow(gamma, float64(m))
			flags := uint32(0)
			if s+n >= T { // the episode's end is within this transition's horizon
				if term {
					disc, flags = 0, buffer.FlagTerminal
				} else {
					flags = buffer.FlagTruncated
				}
			}
			next := states[s+m]
			if math.Abs(float64(o.Reward[s])-ret) > 1e-5 || o.Discount[s] != float32(disc) || o.Flags[s] != flags ||
				o.Obs[2*s] != float32(s) || o.NextObs[2*s] != next[0] || o.NextObs[2*s+1] != next[1] || o.Action[s] != int32(s%3) {
				t.Fatalf("seed %d it %d (n=%d gamma=%v T=%d term=%v) step %d: R %v disc %v flags %v next %v; want R %v disc %v flags %v next %v",
					seed, it, n, gamma, T, term, s, o.Reward[s], o.Discount[s], o.Flags[s], o.NextObs[2*s:2*s+2], ret, disc, flags, next)
			}
		}
		a.ResetOut()
		if a.Out.Len() != 0 {
			t.Fatal("ResetOut left transitions")
		}
	}
}

func TestNStepBadInput(t *testing.T) {
	for _, c := range []struct {
		n      int
		gamma  float64
		obsDim int
	}{{0, 0.9, 1}, {3, -0.1, 1}, {3, 1.1, 1}, {3, math.NaN(), 1}, {3, 0.9, 0}} {
		if _, err := NewNStep(c.n, c.gamma, c.obsDim); err == nil {
			t.Errorf("NewNStep(%d, %v, %d) accepted", c.n, c.gamma, c.obsDim)
		}
	}
	a, _ := NewNStep(2, 0.9, 3)
	if err := a.Add(0, 1, make([]float32, 3), false, false); !errors.Is(err, ErrNoEpisode) {
		t.Errorf("Add before AddFirst: %v", err)
	}
	if err := a.AddFirst(0, make([]float32, 2)); err == nil {
		t.Error("AddFirst accepted an observation of the wrong size")
	}
	_ = a.AddFirst(0, make([]float32, 3))
	if err := a.Add(0, 1, make([]float32, 4), false, false); err == nil {
		t.Error("Add accepted an observation of the wrong size")
	}
	if err := a.Add(0, math.NaN(), make([]float32, 3), false, false); err == nil {
		t.Error("Add accepted a NaN reward")
	}
}

// TestNStepContinuousMatchesReference is TestNStepMatchesReference for an
// adder of continuous actions: the same returns, discounts and flags, and
// each transition's ActionVec row is the action taken at its first state.
func TestNStepContinuousMatchesReference(t *testing.T) {
	const seed, actDim = 23, 3
	rng := rand.New(rand.NewPCG(seed, 0))
	for it := range 200 {
		n := 1 + rng.IntN(5)
		gamma := []float64{0, 0.5, 0.99, 1}[rng.IntN(4)]
		T := 1 + rng.IntN(12)
		term := rng.IntN(2) == 0
		a, err := NewNStepContinuous(n, gamma, 1, actDim)
		if err != nil {
			t.Fatal(err)
		}
		acts := make([][]float32, T)
		rew := make([]float64, T)
		_ = a.AddFirst(uint64(it), obs1(0))
		for i := range T {
			acts[i] = []float32{float32(rng.NormFloat64()), float32(i), -float32(i)}
			rew[i] = rng.NormFloat64()
			if err := a.AddVec(acts[i], rew[i], obs1(float32(i+1)), term && i == T-1, !term && i == T-1); err != nil {
				t.Fatal(err)
			}
			acts[i][1] = -1 // AddVec copied the action: changing it now must not matter
		}
		o := &a.Out
		if o.Len() != T || len(o.ActionVec) != T*actDim || len(o.Action) != 0 {
			t.Fatalf("seed %d it %d: %d transitions, %d action values, %d discrete actions for %d steps", seed, it, o.Len(), len(o.ActionVec), len(o.Action), T)
		}
		for s := range T {
			m := min(n, T-s)
			var ret float64
			for k := range m {
				ret += math.Pow(gamma, float64(k)) * rew[s+k]
			}
			disc, flags := math.Pow(gamma, float64(m)), uint32(0)
			if s+n >= T {
				if term {
					disc, flags = 0, buffer.FlagTerminal
				} else {
					flags = buffer.FlagTruncated
				}
			}
			row := o.ActionVec[s*actDim : (s+1)*actDim]
			if math.Abs(float64(o.Reward[s])-ret) > 1e-5 || o.Discount[s] != float32(disc) || o.Flags[s] != flags ||
				o.Obs[s] != float32(s) || o.NextObs[s] != float32(s+m) || row[0] != acts[s][0] || row[1] != float32(s) || row[2] != -float32(s) {
				t.Fatalf("seed %d it %d (n=%d gamma=%v T=%d term=%v) step %d: R %v disc %v flags %v next %v action %v; want R %v disc %v flags %v next %v",
					seed, it, n, gamma, T, term, s, o.Reward[s], o.Discount[s], o.Flags[s], o.NextObs[s], row, ret, disc, flags, s+m)
			}
		}
		a.ResetOut()
		if a.Out.Len() != 0 || len(a.Out.ActionVec) != 0 {
			t.Fatal("ResetOut left transitions")
		}
	}
}

func TestNStepContinuousBadInput(t *testing.T) {
	if _, err := NewNStepContinuous(3, 0.9, 2, 0); err == nil {
		t.Error("NewNStepContinuous accepted actions of 0 values")
	}
	if _, err := NewNStepContinuous(0, 0.9, 2, 1); err == nil {
		t.Error("NewNStepContinuous accepted n = 0")
	}
	c, _ := NewNStepContinuous(2, 0.9, 1, 2)
	if err := c.AddVec([]float32{0, 0}, 1, obs1(0), false, false); !errors.Is(err, ErrNoEpisode) {
		t.Errorf("AddVec before AddFirst: %v", err)
	}
	_ = c.AddFirst(0, obs1(0))
	for _, act := range [][]float32{{0}, {0, 0, 0}, {0, float32(math.NaN())}, {float32(math.Inf(-1)), 0}} {
		if err := c.AddVec(act, 1, obs1(1), false, false); err == nil {
			t.Errorf("AddVec accepted the action %v", act)
		}
	}
	if err := c.Add(0, 1, obs1(1), false, false); err == nil {
		t.Error("Add (discrete) accepted by a continuous adder")
	}
	d, _ := NewNStep(2, 0.9, 1)
	_ = d.AddFirst(0, obs1(0))
	if err := d.AddVec([]float32{0}, 1, obs1(1), false, false); err == nil {
		t.Error("AddVec (continuous) accepted by a discrete adder")
	}
	if c.Out.Len() != 0 || d.Out.Len() != 0 {
		t.Error("a rejected step emitted transitions")
	}
}
