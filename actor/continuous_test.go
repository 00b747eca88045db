package actor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
)

// boxEnv is a small continuous environment for the tests: a 2-dimensional
// asymmetric action box [-1, 3] × [0, 10] (mid (1, 5), half-range (2, 5)),
// observations (episode seed mod 100, step). The reward of step k of an
// episode (from 0) is k+1 plus a tenth of the first action value. An
// episode reset with an even seed terminates at its 4th step; otherwise it
// is truncated at the time limit (6 steps). Step rejects any action
// outside the box (Gymnasium's tasks clip instead; this one checks the
// actor). It records every step.
type boxEnv struct {
	box    envs.Box
	seed   uint64
	k      int
	live   bool
	steps  []boxStep
	onStep func(n int)
}

type boxStep struct {
	obs, action []float64 // the observation the action was taken at, the action
	res         envs.StepResult
}

const boxEnvLimit, boxEnvTerm = 6, 4

func newBoxEnv() *boxEnv {
	return &boxEnv{box: envs.Box{Low: []float64{-1, 0}, High: []float64{3, 10}}}
}

func (e *boxEnv) ObservationSpace() envs.Box {
	return envs.Box{Low: []float64{0, 0}, High: []float64{100, boxEnvLimit}}
}

func (e *boxEnv) ActionSpace() envs.Space {
	return envs.Box{Low: slices.Clone(e.box.Low), High: slices.Clone(e.box.High)}
}

func (e *boxEnv) MaxEpisodeSteps() int { return boxEnvLimit }

func (e *boxEnv) obs() []float64 { return []float64{float64(e.seed % 100), float64(e.k)} }

func (e *boxEnv) Reset(seed uint64) []float64 {
	e.seed, e.k, e.live = seed, 0, true
	return e.obs()
}

func (e *boxEnv) Step(a envs.Action) (envs.StepResult, error) {
	if !e.live {
		return envs.StepResult{}, envs.ErrNeedsReset
	}
	if !e.box.Contains(a.Vec) {
		return envs.StepResult{}, fmt.Errorf("%w: %v outside %v", envs.ErrInvalidAction, a.Vec, e.box)
	}
	before := e.obs()
	r := float64(e.k+1) + a.Vec[0]/10
	e.k++
	res := envs.StepResult{Obs: e.obs(), Reward: r}
	switch {
	case e.seed%2 == 0 && e.k == boxEnvTerm:
		res.Terminated = true
	case e.k == boxEnvLimit:
		res.Truncated = true
	}
	e.live = !res.Done()
	e.steps = append(e.steps, boxStep{obs: before, action: slices.Clone(a.Vec), res: res})
	if e.onStep != nil {
		e.onStep(len(e.steps))
	}
	return res, nil
}

// actionRecorder wraps an environment and records every continuous action
// and the observation it was taken at.
type actionRecorder struct {
	envs.Env
	cur     []float64
	obs     [][]float64
	actions [][]float64
}

func (r *actionRecorder) Reset(seed uint64) []float64 {
	r.cur = r.Env.Reset(seed)
	return r.cur
}

func (r *actionRecorder) Step(a envs.Action) (envs.StepResult, error) {
	res, err := r.Env.Step(a)
	if err != nil {
		return res, err
	}
	r.obs, r.actions = append(r.obs, r.cur), append(r.actions, slices.Clone(a.Vec))
	r.cur = res.Obs
	return res, nil
}

// policy returns a Tanh policy network in→hidden→out with Glorot weights
// scaled by gain (gain 0: all parameters 0, so π(s) = 0), and a Store
// holding them as version 1.
func policy(t testing.TB, in, out int, hidden []int, gain float64, seed uint64) (*model.Net, *model.Store) {
	t.Helper()
	cfg := model.Config{In: in, Hidden: hidden, Out: out, OutAct: model.Tanh}
	src, err := model.NewNet(cfg, rand.New(rand.NewPCG(seed, 7)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range src.Params() {
		src.Params()[i] *= gain
	}
	net, _ := model.NewNet(cfg, nil)
	var st model.Store
	st.Publish(src.Snapshot(1))
	return net, &st
}

func fillN(t testing.TB, c *Continuous, fills int) *buffer.Transitions {
	t.Helper()
	var all buffer.Transitions
	for range fills {
		var b buffer.Transitions
		if err := c.Fill(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if b.Priority != nil {
			t.Fatalf("a continuous actor handed over %d priorities", len(b.Priority))
		}
		appendAll(&all, &b)
	}
	return &all
}

func TestSigmaSchedule(t *testing.T) {
	if mustSigma(t, 0.1, 0.1, 5, 8) != 0.1 || mustSigma(t, 0.2, 0.9, 0, 1) != 0.2 {
		t.Fatal("constant schedule")
	}
	const n = 6
	for i := range n {
		got := mustSigma(t, 0.05, 0.8, i, n)
		want := 0.05 * math.Pow(16, float64(i)/(n-1))
		if math.Abs(got-want) > 1e-15 {
			t.Errorf("Sigma(0.05, 0.8, %d, %d) = %v, want %v", i, n, got, want)
		}
		if i > 0 {
			if r := got / mustSigma(t, 0.05, 0.8, i-1, n); math.Abs(r-math.Pow(16, 1.0/(n-1))) > 1e-12 {
				t.Errorf("ratio %v between actors %d and %d is not the geometric step", r, i-1, i)
			}
		}
	}
	if mustSigma(t, 0.05, 0.8, n-1, n) != 0.8 {
		t.Error("the last actor does not get SigmaLast exactly")
	}
	for _, c := range [][2]int{{-1, 2}, {2, 2}} {
		if _, err := Sigma(0.1, 0.2, c[0], c[1]); !errors.Is(err, ErrConfig) {
			t.Errorf("Sigma(i=%d, n=%d): %v, want ErrConfig", c[0], c[1], err)
		}
	}
}

func TestContinuousConfigValidate(t *testing.T) {
	c, _, err := ContinuousConfig{}.validated()
	if err != nil {
		t.Fatal(err)
	}
	want := ContinuousConfig{NumActors: 1, Sigma: 0.1, SigmaLast: 0.1, NStep: 3, Gamma: 0.99, LocalBatch: 50, RefreshEvery: 400, StatsWindow: 100}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults %+v, want %+v", c, want)
	}
	if c, _, _ := (ContinuousConfig{NoNoise: true}).validated(); c.Sigma != 0 || c.sigma() != 0 {
		t.Fatalf("NoNoise: %+v", c)
	}
	if c, _, _ := (ContinuousConfig{Sigma: 0.3}).validated(); c.SigmaLast != 0.3 {
		t.Fatalf("SigmaLast defaults to %v, want Sigma", c.SigmaLast)
	}
	inf, nan := math.Inf(1), math.NaN()
	for _, bad := range []ContinuousConfig{
		{Sigma: -0.1}, {Sigma: nan}, {Sigma: inf}, {SigmaLast: -1}, {SigmaLast: inf}, {SigmaLast: nan},
		{NoNoise: true, Sigma: 0.2}, {NoNoise: true, SigmaLast: 0.2}, {RandomSteps: -1},
		{NumActors: -1}, {ID: 1}, {ID: 3, NumActors: 3}, {NStep: -1}, {Gamma: 1.5}, {LocalBatch: -1},
		{RefreshEvery: -1}, {StatsWindow: -1},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: Validate = %v, want ErrConfig", bad, err)
		}
	}
}

func TestNewContinuousRejects(t *testing.T) {
	pend, _ := policy(t, 3, 1, nil, 1, 1)
	box2, _ := policy(t, 2, 2, nil, 1, 1)
	ident, _ := model.NewNet(model.Config{In: 2, Out: 2}, nil)
	unbounded := newBoxEnv()
	unbounded.box.High[1] = math.Inf(1)
	tiny := newBoxEnv() // [1e-50, 2e-50] holds no float32
	tiny.box.Low[0], tiny.box.High[0] = 1e-50, 2e-50
	for _, c := range []struct {
		name string
		cfg  ContinuousConfig
		env  envs.Env
		net  *model.Net
	}{
		{"discrete actions", ContinuousConfig{}, mustEnv(t, "CartPole-v1"), pend},
		{"wrong action width", ContinuousConfig{}, mustEnv(t, "Pendulum-v1"), box2},
		{"wrong observation width", ContinuousConfig{}, newBoxEnv(), pend},
		{"unbounded output", ContinuousConfig{}, newBoxEnv(), ident},
		{"unbounded box", ContinuousConfig{}, unbounded, box2},
		{"no float32 in the box", ContinuousConfig{}, tiny, box2},
		{"bad config", ContinuousConfig{Sigma: -1}, newBoxEnv(), box2},
		{"nil env", ContinuousConfig{}, nil, box2},
		{"nil net", ContinuousConfig{}, newBoxEnv(), nil},
	} {
		if _, err := NewContinuous(c.cfg, c.env, c.net, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: NewContinuous = %v, want ErrConfig", c.name, err)
		}
	}
	var st model.Store
	st.Publish(model.NewParams(1, make([]float64, 3)))
	if _, err := NewContinuous(ContinuousConfig{}, newBoxEnv(), box2, &st); !errors.Is(err, model.ErrShape) {
		t.Errorf("snapshot of the wrong length: %v, want model.ErrShape", err)
	}
}

// TestContinuousActionsInBox: with a saturated policy and large noise the
// actions clip to the bounds, and every action sent and stored lies in the
// box (boxEnv rejects any other; Pendulum's box is checked here).
func TestContinuousActionsInBox(t *testing.T) {
	for _, sigma := range []float64{0.1, 3} {
		env := newBoxEnv()
		net, st := policy(t, 2, 2, []int{8}, 30, 5) // |π(s)| ≈ 1: saturated
		c, err := NewContinuous(ContinuousConfig{Sigma: sigma, LocalBatch: 40, Seed: 3}, env, net, st)
		if err != nil {
			t.Fatal(err)
		}
		all := fillN(t, c, 10)
		atBound := 0
		for i, v := range all.ActionVec {
			j := i % 2
			lo, hi := env.box.Low[j], env.box.High[j]
			if !(float64(v) >= lo && float64(v) <= hi) {
				t.Fatalf("sigma %v: stored action value %v outside [%v, %v]", sigma, v, lo, hi)
			}
			if float64(v) == lo || float64(v) == hi {
				atBound++
			}
		}
		if atBound == 0 {
			t.Errorf("sigma %v: no action at a bound: the clip was never exercised", sigma)
		}
	}
	rec := &actionRecorder{Env: mustEnv(t, "Pendulum-v1")}
	net, st := policy(t, 3, 1, []int{16}, 10, 9)
	c, err := NewContinuous(ContinuousConfig{Sigma: 2, LocalBatch: 50, Seed: 4}, rec, net, st)
	if err != nil {
		t.Fatal(err)
	}
	fillN(t, c, 10)
	box := envs.Box{Low: []float64{-2}, High: []float64{2}}
	for i, a := range rec.actions {
		if !box.Contains(a) {
			t.Fatalf("Pendulum action %d: %v outside %v", i, a, box)
		}
	}
}

// TestContinuousNoiseStd checks that the noise is Gaussian with standard
// deviation σ_i·half_j around ScaleAction(π(s)): with π = 0 the action is
// mid + noise. Bounds, for N draws: the sample mean within 5·sd/√N of 0;
// the sample variance within 5·√(2/(N−1)) of σ² (relative: Var(s²) =
// 2σ⁴/(N−1) for a normal); the fraction within one sd within
// 5·√(p(1−p)/N) of p = 0.6827 (a uniform noise of the same variance gives
// 0.577). Clipping is negligible: the bounds are one half-range, 1/σ sd,
// from the centre, at least 5 sd for the σ <= 0.2 used here
// (P(|z| > 5) = 6e-7).
func TestContinuousNoiseStd(t *testing.T) {
	const N = 20000
	for _, c := range []struct {
		cfg  ContinuousConfig
		want float64
	}{
		{ContinuousConfig{Seed: 1}, 0.1},
		{ContinuousConfig{Sigma: 0.2, Seed: 2}, 0.2},
		{ContinuousConfig{ID: 2, NumActors: 5, Sigma: 0.01, SigmaLast: 0.16, Seed: 3}, 0.04}, // 0.01·16^(2/4)
	} {
		net, st := policy(t, 2, 2, nil, 0, 1)
		a, err := NewContinuous(c.cfg, newBoxEnv(), net, st)
		if err != nil {
			t.Fatal(err)
		}
		if a.Sigma() != c.want && math.Abs(a.Sigma()-c.want) > 1e-15 {
			t.Fatalf("%+v: sigma %v, want %v", c.cfg, a.Sigma(), c.want)
		}
		mid, half := []float64{1, 5}, []float64{2, 5}
		obs := []float32{0, 0}
		var sum, sumSq [2]float64
		var within [2]int
		for range N {
			act := a.SelectAction(obs)
			for j, v := range act {
				d := (v - mid[j]) / half[j] // in half-range units: N(0, σ²)
				sum[j] += d
				sumSq[j] += d * d
				if math.Abs(d) <= c.want {
					within[j]++
				}
			}
		}
		for j := range 2 {
			m := sum[j] / N
			v := (sumSq[j] - N*m*m) / (N - 1)
			frac := float64(within[j]) / N
			const p = 0.682689492
			if math.Abs(m) > 5*c.want/math.Sqrt(N) ||
				math.Abs(v/(c.want*c.want)-1) > 5*math.Sqrt(2.0/(N-1)) ||
				math.Abs(frac-p) > 5*math.Sqrt(p*(1-p)/N) {
				t.Errorf("seed %d, sigma %v, dimension %d: mean %v, std %v (want %v), P(|d| <= sd) = %v (want %v)",
					c.cfg.Seed, c.want, j, m, math.Sqrt(v), c.want, frac, p)
			}
		}
	}
}

// TestContinuousRandomActions: before the first snapshot, and for the
// first RandomSteps steps, actions are uniform in the box; a loaded
// noise-free actor then plays ScaleAction(π(s)) exactly.
func TestContinuousRandomActions(t *testing.T) {
	const seed = 6
	env := newBoxEnv()
	net, full := policy(t, 2, 2, nil, 0, 1) // π = 0: the loaded policy plays mid
	var st model.Store
	c, err := NewContinuous(ContinuousConfig{NoNoise: true, LocalBatch: 100, RefreshEvery: 1 << 20, Seed: seed}, env, net, &st)
	if err != nil {
		t.Fatal(err)
	}
	if c.Stats().ParamsLoaded {
		t.Fatal("loaded from an empty Store")
	}
	all := fillN(t, c, 20)
	checkUniform(t, seed, env.box, all.ActionVec)

	st.Publish(full.Load())
	if ok, err := c.Update(); !ok || err != nil {
		t.Fatalf("Update: %v %v", ok, err)
	}
	from := len(env.steps)
	fillN(t, c, 1)
	for k, s := range env.steps[from:] {
		if s.action[0] != 1 || s.action[1] != 5 {
			t.Fatalf("loaded, noise-free: step %d played %v, want the box's centre (1, 5)", from+k, s.action)
		}
	}
	if len(env.steps) == from {
		t.Fatal("no step after the snapshot")
	}

	// RandomSteps: uniform for the first 1000 steps although loaded.
	env = newBoxEnv()
	net, st2 := policy(t, 2, 2, nil, 0, 1)
	c, err = NewContinuous(ContinuousConfig{NoNoise: true, RandomSteps: 1000, LocalBatch: 100, Seed: seed}, env, net, st2)
	if err != nil {
		t.Fatal(err)
	}
	fillN(t, c, 12) // 1200 transitions: at least 1200 steps
	var head []float32
	for k, s := range env.steps {
		centre := s.action[0] == 1 && s.action[1] == 5
		switch {
		case k < 1000 && centre:
			t.Fatalf("step %d of the RandomSteps played the policy", k)
		case k >= 1000 && !centre:
			t.Fatalf("step %d after RandomSteps played %v, want the policy's (1, 5)", k, s.action)
		case k < 1000:
			head = append(head, float32(s.action[0]), float32(s.action[1]))
		}
	}
	checkUniform(t, seed, env.box, head)
}

// checkUniform checks that each dimension's values fall evenly in the four
// quarters of the box: each count within 5 sd of N/4 (sd = √(N·3/16)).
func checkUniform(t *testing.T, seed uint64, box envs.Box, vec []float32) {
	t.Helper()
	A := box.Dim()
	n := len(vec) / A
	for j := range A {
		var q [4]int
		for i := range n {
			u := (float64(vec[i*A+j]) - box.Low[j]) / (box.High[j] - box.Low[j])
			if u < 0 || u > 1 {
				t.Fatalf("seed %d: value %v outside the box", seed, vec[i*A+j])
			}
			q[min(int(u*4), 3)]++
		}
		for _, k := range q {
			if math.Abs(float64(k)-float64(n)/4) > 5*math.Sqrt(float64(n)*3/16) {
				t.Fatalf("seed %d, dimension %d: quarter counts %v of %d, not uniform", seed, j, q, n)
			}
		}
	}
}

// TestContinuousTransitions checks the handed-over transitions against the
// environment's record: the stored action is exactly the one sent, the
// observations are the float32 ones, the n-step returns and discounts
// follow the definition (discount 0 and FlagTerminal only on termination,
// gamma^m and FlagTruncated at the time limit), and the batches insert
// into a continuous buffer configured with ColumnsOf.
func TestContinuousTransitions(t *testing.T) {
	const n, gamma, batch, fills = 3, 0.9, 7, 30
	env := newBoxEnv()
	net, st := policy(t, 2, 2, []int{8}, 1, 4)
	bcfg := buffer.Config{Capacity: 1024, ObsDim: 2, Action: buffer.Continuous, ActionDim: 2, Episode: true, GlobalStep: true, ActorID: true}
	buf, err := buffer.New(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ContinuousConfig{ID: 1, NumActors: 2, NStep: n, Gamma: gamma, LocalBatch: batch, Seed: 8, Columns: ColumnsOf(bcfg)}
	if cfg.Columns != (Columns{Episode: true, GlobalStep: true, ActorID: true}) {
		t.Fatalf("ColumnsOf a continuous buffer: %+v", cfg.Columns)
	}
	c, err := NewContinuous(cfg, env, net, st)
	if err != nil {
		t.Fatal(err)
	}
	var all buffer.Transitions
	for range fills {
		var b buffer.Transitions
		if err := c.Fill(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if b.Len() != batch || len(b.ActionVec) != 2*batch || b.Action != nil || b.Priority != nil {
			t.Fatalf("batch of %d with %d action values, %d discrete actions, %d priorities", b.Len(), len(b.ActionVec), len(b.Action), len(b.Priority))
		}
		if err := buf.Insert(&b); err != nil {
			t.Fatalf("Insert into a continuous buffer: %v", err)
		}
		appendAll(&all, &b)
	}
	if buf.Size() != fills*batch {
		t.Fatalf("buffer holds %d", buf.Size())
	}

	// Transitions come out in the order of their first steps, so item k is
	// step k of the record. Episodes: consecutive steps until one is done;
	// the last one may still be running (its length unknown, taken as
	// unbounded: its items are all complete n-step ones).
	type pos struct{ start, len int }
	var episodes []pos
	start := 0
	for k, s := range env.steps {
		if s.res.Done() {
			episodes = append(episodes, pos{start, k + 1 - start})
			start = k + 1
		}
	}
	if start < len(env.steps) {
		episodes = append(episodes, pos{start, math.MaxInt32})
	}
	var terms, truncs int
	for k := range all.Len() {
		s := env.steps[k]
		ep := episodes[slices.IndexFunc(episodes, func(p pos) bool { return k < p.start+p.len })]
		i := k - ep.start // step within the episode
		m := min(n, ep.len-i)
		var ret float64
		for q := range m {
			ret += math.Pow(gamma, float64(q)) * env.steps[k+q].res.Reward
		}
		disc, flags := math.Pow(gamma, float64(m)), uint32(0)
		var end envs.StepResult
		if i+n >= ep.len {
			end = env.steps[ep.start+ep.len-1].res
			if end.Terminated {
				disc, flags = 0, buffer.FlagTerminal
				terms++
			} else {
				flags = buffer.FlagTruncated
				truncs++
			}
		}
		next := env.steps[k+m-1].res.Obs
		act := all.ActionVec[2*k : 2*k+2]
		if float64(act[0]) != s.action[0] || float64(act[1]) != s.action[1] {
			t.Fatalf("item %d: stored action %v, sent %v", k, act, s.action)
		}
		if all.Obs[2*k] != float32(s.obs[0]) || all.Obs[2*k+1] != float32(s.obs[1]) ||
			all.NextObs[2*k] != float32(next[0]) || all.NextObs[2*k+1] != float32(next[1]) {
			t.Fatalf("item %d: obs %v next %v, want %v %v", k, all.Obs[2*k:2*k+2], all.NextObs[2*k:2*k+2], s.obs, next)
		}
		if math.Abs(float64(all.Reward[k])-ret) > 1e-5 || all.Discount[k] != float32(disc) || all.Flags[k] != flags {
			t.Fatalf("item %d (step %d of an episode of %d, terminated %v): R %v disc %v flags %v; want %v %v %v",
				k, i, ep.len, end.Terminated, all.Reward[k], all.Discount[k], all.Flags[k], ret, disc, flags)
		}
		if all.EpisodeStep[k] != int32(i) || all.GlobalStep[k] != int64(k) || all.ActorID[k] != 1 || all.EpisodeID[k]>>32 != 1 {
			t.Fatalf("item %d: episode step %d, global step %d, actor %d, episode %x", k, all.EpisodeStep[k], all.GlobalStep[k], all.ActorID[k], all.EpisodeID[k])
		}
	}
	if terms == 0 || truncs == 0 {
		t.Fatalf("%d terminal and %d truncated items: both kinds of episode end should occur", terms, truncs)
	}
}

// TestContinuousDeterministic: the same (Seed, ID) and snapshots give the
// same transitions; another seed or ID gives others.
func TestContinuousDeterministic(t *testing.T) {
	run := func(c ContinuousConfig) *buffer.Transitions {
		net, st := policy(t, 3, 1, []int{16}, 1, 2)
		c.NumActors, c.LocalBatch, c.RefreshEvery, c.RandomSteps = 4, 32, 50, 40
		c.Columns = Columns{Episode: true, GlobalStep: true, ActorID: true}
		a, err := NewContinuous(c, mustEnv(t, "Pendulum-v1"), net, st)
		if err != nil {
			t.Fatal(err)
		}
		return fillN(t, a, 10)
	}
	x, y := run(ContinuousConfig{ID: 1, Seed: 42}), run(ContinuousConfig{ID: 1, Seed: 42})
	if !reflect.DeepEqual(x, y) {
		t.Fatal("same seed, different transitions")
	}
	if z := run(ContinuousConfig{ID: 1, Seed: 43}); reflect.DeepEqual(x.ActionVec, z.ActionVec) {
		t.Fatal("seeds 42 and 43 gave the same actions")
	}
	if z := run(ContinuousConfig{ID: 2, Seed: 42}); reflect.DeepEqual(x.ActionVec, z.ActionVec) {
		t.Fatal("actors 1 and 2 gave the same actions")
	}
}

// TestContinuousCancelAndStats: a cancelled Fill hands over a partial
// batch; Stats report sigma and match the steps, read concurrently with
// Fill (for the race detector); a batch with priorities is refused.
func TestContinuousCancelAndStats(t *testing.T) {
	env := newBoxEnv()
	net, st := policy(t, 2, 2, nil, 1, 3)
	c, err := NewContinuous(ContinuousConfig{Sigma: 0.3, NStep: 3, LocalBatch: 50}, env, net, st)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env.onStep = func(k int) {
		if k == 2 { // steps 1 and 2 of the first episode: nothing complete yet
			cancel()
		}
	}
	var b buffer.Transitions
	if err := c.Fill(ctx, &b); err != nil || b.Len() != 0 || len(env.steps) != 2 {
		t.Fatalf("cancelled at step 2: err %v, %d items, %d steps", err, b.Len(), len(env.steps))
	}
	env.onStep = nil

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if s := c.Stats(); s.Sigma != 0.3 || s.Epsilon != 0 {
				t.Errorf("stats %+v", s)
				return
			}
		}
	})
	for range 10 {
		b = buffer.Transitions{}
		if err := c.Fill(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	s := c.Stats()
	if s.Steps != int64(len(env.steps)) || s.Transitions != 500 || s.Batches != 10 || s.Episodes == 0 || !s.ParamsLoaded || s.ParamsVersion != 1 {
		t.Fatalf("stats %+v after %d steps", s, len(env.steps))
	}
	b.Priority = make([]float64, b.Len())
	if err := c.Fill(context.Background(), &b); err == nil {
		t.Fatal("Fill accepted a batch with priorities")
	}
}

// TestContinuousNonFinitePolicy: a diverged policy (NaN parameters) stops
// Fill with model.ErrNonFinite before anything reaches the environment.
func TestContinuousNonFinitePolicy(t *testing.T) {
	env := newBoxEnv()
	net, _ := policy(t, 2, 2, nil, 1, 1)
	w := make([]float64, net.NumParams())
	w[0] = math.NaN()
	var st model.Store
	st.Publish(model.NewParams(1, w))
	c, err := NewContinuous(ContinuousConfig{}, env, net, &st)
	if err != nil {
		t.Fatal(err)
	}
	var b buffer.Transitions
	if err := c.Fill(context.Background(), &b); !errors.Is(err, model.ErrNonFinite) || len(env.steps) != 0 {
		t.Fatalf("Fill = %v after %d steps, want model.ErrNonFinite at once", err, len(env.steps))
	}
}
