package actor

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// recorder wraps an environment and records every reset and step.
type recorder struct {
	envs.Env
	seeds []uint64
	steps []recStep
	// onStep, if set, runs after every step with the number of steps so far.
	onStep func(n int)
	cur    []float64 // the observation the next action is taken at
}

type recStep struct {
	obs    []float64 // observation the action was taken at
	action int
	res    envs.StepResult
}

func (r *recorder) Reset(seed uint64) []float64 {
	r.seeds = append(r.seeds, seed)
	obs := r.Env.Reset(seed)
	r.cur = obs
	return obs
}

func (r *recorder) Step(a envs.Action) (envs.StepResult, error) {
	res, err := r.Env.Step(a)
	if err != nil {
		return res, err
	}
	r.steps = append(r.steps, recStep{obs: r.cur, action: a.Index, res: res})
	r.cur = res.Obs
	if r.onStep != nil {
		r.onStep(len(r.steps))
	}
	return res, nil
}

// StateHash forwards to the wrapped environment (0 if it has none).
func (r *recorder) StateHash() uint64 {
	if h, ok := r.Env.(envs.StateHasher); ok {
		return h.StateHash()
	}
	return 0
}

func mustEnv(t testing.TB, name string, opts ...envs.Option) envs.Env {
	t.Helper()
	e, err := envs.Make(name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// linear returns a network with no hidden layer, Q = x·W + b, and its
// parameters published as version 1 in a new Store.
func linear(t testing.TB, in, out int, w []float64) (*model.Net, *model.Store) {
	t.Helper()
	net, err := model.NewNet(model.Config{In: in, Out: out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != net.NumParams() {
		t.Fatalf("%d weights for %d parameters", len(w), net.NumParams())
	}
	var st model.Store
	st.Publish(model.NewParams(1, w))
	return net, &st
}

// glorot returns an initialised network and a Store holding its parameters.
func glorot(t testing.TB, cfg model.Config, seed uint64) (*model.Net, *model.Store) {
	t.Helper()
	src, err := model.NewNet(cfg, rand.New(rand.NewPCG(seed, 1)))
	if err != nil {
		t.Fatal(err)
	}
	net, _ := model.NewNet(cfg, nil)
	var st model.Store
	st.Publish(src.Snapshot(1))
	return net, &st
}

func newPER(t testing.TB, obsDim int, alpha, eps float64) *sampler.PER {
	t.Helper()
	buf, err := buffer.New(buffer.Config{Capacity: 1024, ObsDim: obsDim})
	if err != nil {
		t.Fatal(err)
	}
	p, err := sampler.NewPER(buf, sampler.PERConfig{Alpha: alpha, Beta: sampler.Linear{Start: 1, End: 1}, Eps: eps})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func argmax32(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

func TestEpsilonSchedule(t *testing.T) {
	pow := math.Pow
	for _, c := range []struct {
		i, n int
		want float64
	}{
		{0, 1, 0.4},
		{0, 2, 0.4}, {1, 2, pow(0.4, 8)},
		{0, 8, 0.4}, {1, 8, pow(0.4, 2)}, {3, 8, pow(0.4, 4)}, {7, 8, pow(0.4, 8)},
		{0, 64, 0.4}, {63, 64, pow(0.4, 8)},
	} {
		got := mustEpsilon(t, DefaultEpsilonBase, DefaultEpsilonAlpha, c.i, c.n)
		if math.Abs(got-c.want) > 1e-15*c.want {
			t.Errorf("Epsilon(0.4, 7, %d, %d) = %v, want %v", c.i, c.n, got, c.want)
		}
		// The default Config gives the same rate.
		net, _ := model.NewNet(model.Config{In: 4, Out: 2}, nil)
		a, err := New(Config{ID: c.i, NumActors: c.n}, mustEnv(t, "CartPole-v1"), net, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.Epsilon() != got || a.Stats().Epsilon != got {
			t.Errorf("actor %d of %d: epsilon %v, want %v", c.i, c.n, a.Epsilon(), got)
		}
	}
	// Decreasing in i.
	for i := 1; i < 8; i++ {
		if !(mustEpsilon(t, 0.4, 7, i, 8) < mustEpsilon(t, 0.4, 7, i-1, 8)) {
			t.Errorf("epsilon not decreasing at %d", i)
		}
	}
	net, _ := model.NewNet(model.Config{In: 4, Out: 2}, nil)
	a, _ := New(Config{ID: 3, NumActors: 8, FixedEpsilon: true, Epsilon: 0.25}, mustEnv(t, "CartPole-v1"), net, nil, nil)
	if a.Epsilon() != 0.25 {
		t.Errorf("FixedEpsilon: %v", a.Epsilon())
	}
	if _, err := Epsilon(0.4, 7, 2, 2); !errors.Is(err, ErrConfig) {
		t.Errorf("Epsilon(i = n): %v, want ErrConfig", err)
	}
}

func TestConfigValidate(t *testing.T) {
	c, err := Config{}.validated()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{NumActors: 1, EpsilonBase: 0.4, EpsilonAlpha: 7, NStep: 3, Gamma: 0.99, LocalBatch: 50, RefreshEvery: 400, StatsWindow: 100}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults %+v, want %+v", c, want)
	}
	for _, bad := range []Config{
		{NumActors: -1}, {ID: 1}, {ID: -1, NumActors: 2}, {ID: 4, NumActors: 4},
		{EpsilonBase: 1.5}, {EpsilonBase: -0.1}, {EpsilonBase: math.NaN()},
		{EpsilonAlpha: -1}, {EpsilonAlpha: math.Inf(1)}, {EpsilonAlpha: math.NaN()},
		{FixedEpsilon: true, Epsilon: 1.1}, {FixedEpsilon: true, Epsilon: -0.1}, {Epsilon: 0.3},
		{NStep: -1}, {Gamma: 1.01}, {Gamma: -0.5}, {Gamma: math.NaN()},
		{LocalBatch: -1}, {RefreshEvery: -1}, {StatsWindow: -2},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: Validate = %v, want ErrConfig", bad, err)
		}
	}
}

func TestNewRejects(t *testing.T) {
	net4x2, _ := model.NewNet(model.Config{In: 4, Out: 2}, nil)
	net4x3, _ := model.NewNet(model.Config{In: 4, Out: 3}, nil)
	net3x1, _ := model.NewNet(model.Config{In: 3, Out: 1}, nil)
	for _, c := range []struct {
		name string
		cfg  Config
		env  envs.Env
		net  *model.Net
	}{
		{"continuous actions", Config{}, mustEnv(t, "Pendulum-v1"), net3x1},
		{"wrong action count", Config{}, mustEnv(t, "CartPole-v1"), net4x3},
		{"wrong observation width", Config{}, mustEnv(t, "Acrobot-v1"), net4x2},
		{"bad config", Config{NStep: -2}, mustEnv(t, "CartPole-v1"), net4x2},
		{"nil env", Config{}, nil, net4x2},
		{"nil net", Config{}, mustEnv(t, "CartPole-v1"), nil},
	} {
		if _, err := New(c.cfg, c.env, c.net, nil, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New = %v, want ErrConfig", c.name, err)
		}
	}
	var st model.Store
	st.Publish(model.NewParams(1, make([]float64, 3)))
	if _, err := New(Config{}, mustEnv(t, "CartPole-v1"), net4x2, &st, nil); !errors.Is(err, model.ErrShape) {
		t.Errorf("snapshot of the wrong length: %v, want model.ErrShape", err)
	}
}

// nchainForward returns linear weights for NChain of n states under which
// the greedy action at state s is preferred(s).
func nchainWeights(n int, preferred func(s int) int) []float64 {
	w := make([]float64, n*2+2) // W (n×2) then b (2)
	for s := range n {
		w[s*2+preferred(s)] = 1 + float64(s)/10
		w[s*2+1-preferred(s)] = -0.5
	}
	w[n*2], w[n*2+1] = 0.05, -0.05
	return w
}

func TestGreedyAction(t *testing.T) {
	const n = 6
	prefer := func(s int) int { return s % 3 % 2 } // 0 1 0 0 1 0
	net, st := linear(t, n, 2, nchainWeights(n, prefer))
	a, err := New(Config{FixedEpsilon: true, LocalBatch: 8}, mustEnv(t, "NChain", envs.WithSize(n)), net, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	for s := range n {
		obs := make([]float32, n)
		obs[s] = 1
		if got := a.SelectAction(obs); got != prefer(s) {
			t.Errorf("state %d: action %d, want %d", s, got, prefer(s))
		}
	}
	// A forward-only greedy policy walks the chain: every action 0, each
	// episode n-1 steps long with return 1.
	net, st = linear(t, n, 2, nchainWeights(n, func(int) int { return envs.NChainForward }))
	a, _ = New(Config{FixedEpsilon: true, LocalBatch: 8, Columns: Columns{Episode: true}}, mustEnv(t, "NChain", envs.WithSize(n)), net, st, nil)
	var b buffer.Transitions
	for range 3 {
		if err := a.Fill(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	for i, act := range b.Action {
		if act != 0 {
			t.Fatalf("item %d: action %d, want 0", i, act)
		}
		if s := argmax32(b.Obs[i*n : (i+1)*n]); int32(s) != b.EpisodeStep[i] {
			t.Fatalf("item %d: state %d at episode step %d", i, s, b.EpisodeStep[i])
		}
	}
	// Three batches of 8 need five episodes of 5 steps: the fifth episode's
	// end flushes the last three.
	s := a.Stats()
	if s.Episodes != 5 || s.LastReturn != 1 || s.MeanReturn != 1 || s.LastLength != n-1 || s.Steps != 25 || s.Transitions != 24 {
		t.Fatalf("stats %+v", s)
	}
}

// TestBatchStructure checks what Fill hands over against a reference NStep
// fed with the recorded trajectory, and every optional column against the
// recording, over episodes that end by termination and by truncation.
func TestBatchStructure(t *testing.T) {
	const n, nstep, batch, fills = 5, 3, 7, 40
	rec := &recorder{Env: mustEnv(t, "NChain", envs.WithSize(n), envs.WithMaxSteps(6))}
	net, st := linear(t, n, 2, nchainWeights(n, func(int) int { return 0 }))
	cfg := Config{ID: 2, NumActors: 3, FixedEpsilon: true, Epsilon: 0.5, NStep: nstep, Gamma: 0.9, LocalBatch: batch, Seed: 11,
		Columns: Columns{Episode: true, GlobalStep: true, ActorID: true, StateHash: true}}
	a, err := New(cfg, rec, net, st, newPER(t, n, 0.6, 1e-6))
	if err != nil {
		t.Fatal(err)
	}
	bufAll, err := buffer.New(buffer.Config{Capacity: 4096, ObsDim: n, NumActions: 2, Episode: true, GlobalStep: true, ActorID: true, StateHash: true})
	if err != nil {
		t.Fatal(err)
	}
	if ColumnsOf(bufAll.Config()) != cfg.Columns {
		t.Fatalf("ColumnsOf = %+v", ColumnsOf(bufAll.Config()))
	}
	var all buffer.Transitions
	for range fills {
		var b buffer.Transitions
		if err := a.Fill(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if b.Len() != batch {
			t.Fatalf("batch of %d, want %d", b.Len(), batch)
		}
		for _, col := range []int{len(b.Action), len(b.Discount), len(b.Flags), len(b.EpisodeID), len(b.EpisodeStep), len(b.GlobalStep), len(b.ActorID), len(b.StateHash), len(b.NextStateHash), len(b.Priority)} {
			if col != batch {
				t.Fatalf("a column has %d values, want %d", col, batch)
			}
		}
		if err := bufAll.Insert(&b); err != nil {
			t.Fatalf("Insert: %v", err)
		}
		appendAll(&all, &b)
	}

	// Reference: the adder on the recorded trajectory.
	ref, _ := NewNStep(nstep, 0.9, n)
	f32 := func(x []float64) []float32 {
		y := make([]float32, len(x))
		for i, v := range x {
			y[i] = float32(v)
		}
		return y
	}
	ep, terms, truncs := uint64(2)<<32, 0, 0
	start := true
	for _, s := range rec.steps {
		if start {
			_ = ref.AddFirst(ep, f32(s.obs))
			ep++
			start = false
		}
		_ = ref.Add(int32(s.action), s.res.Reward, f32(s.res.Obs), s.res.Terminated, s.res.Truncated)
		if s.res.Done() {
			start = true
			if s.res.Terminated {
				terms++
			} else {
				truncs++
			}
		}
	}
	if terms == 0 || truncs == 0 {
		t.Fatalf("%d terminations and %d truncations: the test needs both", terms, truncs)
	}
	o := &ref.Out
	m := all.Len()
	if o.Len() < m {
		t.Fatalf("reference has %d items, the actor handed over %d", o.Len(), m)
	}
	if !reflect.DeepEqual(all.Obs, o.Obs[:m*n]) || !reflect.DeepEqual(all.NextObs, o.NextObs[:m*n]) ||
		!reflect.DeepEqual(all.Action, o.Action[:m]) || !reflect.DeepEqual(all.Reward, o.Reward[:m]) ||
		!reflect.DeepEqual(all.Discount, o.Discount[:m]) || !reflect.DeepEqual(all.Flags, o.Flags[:m]) ||
		!reflect.DeepEqual(all.EpisodeID, o.EpisodeID[:m]) || !reflect.DeepEqual(all.EpisodeStep, o.EpisodeStep[:m]) {
		t.Fatal("handed-over transitions differ from the reference adder's on the recorded trajectory")
	}
	// Optional columns against the recording.
	epStart := map[uint64]int64{}
	{
		var g int64
		id := uint64(2) << 32
		epStart[id] = 0
		for _, s := range rec.steps {
			g++
			if s.res.Done() {
				id++
				epStart[id] = g
			}
		}
	}
	for i := range m {
		if all.ActorID[i] != 2 {
			t.Fatalf("item %d: ActorID %d", i, all.ActorID[i])
		}
		if want := epStart[all.EpisodeID[i]] + int64(all.EpisodeStep[i]); all.GlobalStep[i] != want {
			t.Fatalf("item %d: GlobalStep %d, want %d", i, all.GlobalStep[i], want)
		}
		if rec.steps[all.GlobalStep[i]].action != int(all.Action[i]) {
			t.Fatalf("item %d: GlobalStep %d does not name the step of its action", i, all.GlobalStep[i])
		}
		if all.StateHash[i] != uint64(argmax32(all.Obs[i*n:(i+1)*n])) || all.NextStateHash[i] != uint64(argmax32(all.NextObs[i*n:(i+1)*n])) {
			t.Fatalf("item %d: state codes %d → %d for states %v → %v", i, all.StateHash[i], all.NextStateHash[i], all.Obs[i*n:(i+1)*n], all.NextObs[i*n:(i+1)*n])
		}
	}
	// Episode seeds come from the actor's generator: all different.
	seen := map[uint64]bool{}
	for _, s := range rec.seeds {
		if seen[s] {
			t.Fatalf("episode seed %d used twice", s)
		}
		seen[s] = true
	}

	// A buffer without the optional columns takes the same actor's batches
	// when Columns says so.
	bufMin, _ := buffer.New(buffer.Config{Capacity: 256, ObsDim: n})
	a2, _ := New(Config{FixedEpsilon: true, Epsilon: 0.5, LocalBatch: batch, Columns: ColumnsOf(bufMin.Config())},
		mustEnv(t, "NChain", envs.WithSize(n), envs.WithMaxSteps(6)), net, st, newPER(t, n, 0.6, 1e-6))
	var b buffer.Transitions
	if err := a2.Fill(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if b.EpisodeID != nil || b.GlobalStep != nil || b.ActorID != nil || b.StateHash != nil {
		t.Fatal("columns filled that Columns does not select")
	}
	if err := bufMin.Insert(&b); err != nil {
		t.Fatalf("Insert into a buffer without optional columns: %v", err)
	}
}

func appendAll(dst, src *buffer.Transitions) {
	dst.Obs = append(dst.Obs, src.Obs...)
	dst.NextObs = append(dst.NextObs, src.NextObs...)
	dst.Action = append(dst.Action, src.Action...)
	dst.ActionVec = append(dst.ActionVec, src.ActionVec...)
	dst.Reward = append(dst.Reward, src.Reward...)
	dst.Discount = append(dst.Discount, src.Discount...)
	dst.Flags = append(dst.Flags, src.Flags...)
	dst.EpisodeID = append(dst.EpisodeID, src.EpisodeID...)
	dst.EpisodeStep = append(dst.EpisodeStep, src.EpisodeStep...)
	dst.GlobalStep = append(dst.GlobalStep, src.GlobalStep...)
	dst.ActorID = append(dst.ActorID, src.ActorID...)
	dst.StateHash = append(dst.StateHash, src.StateHash...)
	dst.NextStateHash = append(dst.NextStateHash, src.NextStateHash...)
	dst.Priority = append(dst.Priority, src.Priority...)
}

// TestPriorities checks every handed-over priority against
// sel.Priority(|δ|) computed independently: for a linear network on
// NChain's one-hot states Q(s, a) = W[s, a] + b[a] exactly, and PER's
// priority is (|δ| + eps)^alpha.
func TestPriorities(t *testing.T) {
	const n, nstep, gamma, alpha, eps = 6, 3, 0.9, 0.6, 1e-6
	rng := rand.New(rand.NewPCG(5, 6))
	w := make([]float64, 2*n+2)
	for i := range w {
		w[i] = rng.NormFloat64()
	}
	q := func(s, a int) float64 { return w[s*2+a] + w[2*n+a] }
	net, st := linear(t, n, 2, w)
	sel := newPER(t, n, alpha, eps)
	a, err := New(Config{FixedEpsilon: true, Epsilon: 0.6, NStep: nstep, Gamma: gamma, LocalBatch: 11, Seed: 3},
		mustEnv(t, "NChain", envs.WithSize(n), envs.WithMaxSteps(7)), net, st, sel)
	if err != nil {
		t.Fatal(err)
	}
	var flags [3]int
	for range 30 {
		var b buffer.Transitions
		if err := a.Fill(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if len(b.Priority) != b.Len() {
			t.Fatalf("%d priorities for %d items", len(b.Priority), b.Len())
		}
		for i := range b.Len() {
			s, s2 := argmax32(b.Obs[i*n:(i+1)*n]), argmax32(b.NextObs[i*n:(i+1)*n])
			target := float64(b.Reward[i])
			if b.Discount[i] != 0 {
				target += float64(b.Discount[i]) * math.Max(q(s2, 0), q(s2, 1))
			}
			delta := math.Abs(target - q(s, int(b.Action[i])))
			want := math.Pow(delta+eps, alpha)
			if math.Abs(b.Priority[i]-want) > 1e-12*want || math.Abs(b.Priority[i]-sel.Priority(delta)) > 1e-12*want {
				t.Fatalf("item %d (state %d action %d → %d, R %v disc %v): priority %v, want %v", i, s, b.Action[i], s2, b.Reward[i], b.Discount[i], b.Priority[i], want)
			}
			flags[b.Flags[i]]++
		}
	}
	if flags[0] == 0 || flags[buffer.FlagTerminal] == 0 || flags[buffer.FlagTruncated] == 0 {
		t.Fatalf("flags seen %v: the test needs all three kinds", flags)
	}
}

// TestPrioritiesDeepNet compares priorities with a nonlinear network
// against one-observation forward passes on a clone, computed in float64.
func TestPrioritiesDeepNet(t *testing.T) {
	cfg := model.Config{In: 4, Hidden: []int{16, 16}, Out: 2}
	net, st := glorot(t, cfg, 9)
	ref, _ := model.NewNet(cfg, nil)
	_ = ref.SetParams(st.Load())
	sel := newPER(t, 4, 0.5, 0.01)
	a, err := New(Config{FixedEpsilon: true, Epsilon: 0.3, LocalBatch: 50, Seed: 4}, mustEnv(t, "CartPole-v1", envs.WithMaxSteps(30)), net, st, sel)
	if err != nil {
		t.Fatal(err)
	}
	fwd := func(x []float32) []float64 { return append([]float64(nil), ref.Forward32(x)...) }
	for range 10 {
		var b buffer.Transitions
		if err := a.Fill(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		for i := range b.Len() {
			qs := fwd(b.Obs[i*4 : (i+1)*4])
			qn := fwd(b.NextObs[i*4 : (i+1)*4])
			target := float64(b.Reward[i])
			if b.Discount[i] != 0 {
				target += float64(b.Discount[i]) * math.Max(qn[0], qn[1])
			}
			want := sel.Priority(math.Abs(target - qs[b.Action[i]]))
			if math.Abs(b.Priority[i]-want) > 1e-9*want {
				t.Fatalf("item %d: priority %v, want %v", i, b.Priority[i], want)
			}
		}
	}
}

func TestNonFiniteTDError(t *testing.T) {
	w := make([]float64, 4*2+2)
	w[0] = math.NaN()
	net, st := linear(t, 4, 2, w)
	a, _ := New(Config{LocalBatch: 5}, mustEnv(t, "CartPole-v1"), net, st, newPER(t, 4, 0.6, 1e-6))
	var b buffer.Transitions
	if err := a.Fill(context.Background(), &b); !errors.Is(err, model.ErrNonFinite) {
		t.Fatalf("Fill with a NaN weight: %v, want model.ErrNonFinite", err)
	}
}

// TestRefresh checks that the Store is read every RefreshEvery steps and
// the network reloaded only when the version changed.
func TestRefresh(t *testing.T) {
	const every = 10
	cfg := model.Config{In: 4, Hidden: []int{8}, Out: 2}
	src, _ := model.NewNet(cfg, rand.New(rand.NewPCG(1, 1)))
	net, _ := model.NewNet(cfg, nil)
	var st model.Store
	a, err := New(Config{RefreshEvery: every, LocalBatch: 1000}, mustEnv(t, "CartPole-v1"), net, &st, nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := func(k int) {
		t.Helper()
		for range k {
			if err := a.step(); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(reads, loads int64, version uint64, loaded bool) {
		t.Helper()
		s := a.Stats()
		if s.ParamReads != reads || s.ParamLoads != loads || s.ParamsVersion != version || s.ParamsLoaded != loaded {
			t.Fatalf("after %d steps: reads %d loads %d version %d loaded %v; want %d %d %d %v",
				s.Steps, s.ParamReads, s.ParamLoads, s.ParamsVersion, s.ParamsLoaded, reads, loads, version, loaded)
		}
	}
	check(1, 0, 0, false) // New read an empty Store
	steps(every - 1)
	check(1, 0, 0, false)
	st.Publish(src.Snapshot(0)) // version 0 still counts as new: nothing was loaded
	steps(1)
	check(2, 1, 0, true)
	if !reflect.DeepEqual(net.Params(), src.Params()) {
		t.Fatal("network does not hold the snapshot")
	}
	st.Publish(src.Snapshot(0)) // same version, new object: no copy
	steps(2*every + 3)
	check(4, 1, 0, true)
	for i := range src.Params() {
		src.Params()[i] += 1
	}
	st.Publish(src.Snapshot(7))
	steps(every - 4) // step 39: not yet
	check(4, 1, 0, true)
	if reflect.DeepEqual(net.Params(), src.Params()) {
		t.Fatal("network reloaded before its refresh step")
	}
	steps(1) // step 40
	check(5, 2, 7, true)
	if !reflect.DeepEqual(net.Params(), src.Params()) {
		t.Fatal("network does not hold version 7")
	}
	if ok, err := a.Update(); ok || err != nil {
		t.Fatalf("Update with an unchanged version: %v %v", ok, err)
	}
	check(6, 2, 7, true)
}

// TestRandomUntilFirstSnapshot: with an empty Store the actor explores
// uniformly and hands batches over without priorities.
func TestRandomUntilFirstSnapshot(t *testing.T) {
	const n = 8
	net, _ := model.NewNet(model.Config{In: n, Out: 2}, nil)
	var st model.Store
	a, _ := New(Config{FixedEpsilon: true, LocalBatch: 40, RefreshEvery: 1000, Columns: Columns{Episode: true}},
		mustEnv(t, "NChain", envs.WithSize(n)), net, &st, newPER(t, n, 0.6, 1e-6))
	var b buffer.Transitions
	if err := a.Fill(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	var count [2]int
	for _, act := range b.Action {
		count[act]++
	}
	if count[0] < 10 || count[1] < 10 {
		t.Fatalf("actions %v: an actor without parameters should act uniformly (a zero network would always pick 0)", count)
	}
	if b.Priority != nil {
		t.Fatal("priorities handed over before the first snapshot")
	}
	// Once t holds prioritised items, unknown ones get Priority(-1).
	b2 := buffer.Transitions{Obs: make([]float32, n), NextObs: make([]float32, n), Action: []int32{0}, Reward: []float32{0}, Discount: []float32{1}, Flags: []uint32{0}, EpisodeID: []uint64{0}, EpisodeStep: []int32{0}, Priority: []float64{0.5}}
	if err := a.Fill(context.Background(), &b2); err != nil {
		t.Fatal(err)
	}
	if len(b2.Priority) != b2.Len() || b2.Priority[1] != a.sel.Priority(-1) {
		t.Fatalf("unknown priorities appended to a prioritised batch: %d of %d, %v", len(b2.Priority), b2.Len(), b2.Priority[1:3])
	}
}

func TestCancel(t *testing.T) {
	const n = 20
	net, st := linear(t, n, 2, nchainWeights(n, func(int) int { return 0 }))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{Env: mustEnv(t, "NChain", envs.WithSize(n))}
	rec.onStep = func(k int) {
		if k == 7 {
			cancel()
		}
	}
	a, _ := New(Config{FixedEpsilon: true, LocalBatch: 50}, rec, net, st, newPER(t, n, 0.6, 1e-6))
	var b buffer.Transitions
	if err := a.Fill(ctx, &b); err != nil {
		t.Fatalf("Fill after cancellation: %v, want nil", err)
	}
	// Cancelled during step 7: the loop stops before step 8 and hands over
	// the 7-(3-1) = 5 transitions completed so far, without priorities.
	if len(rec.steps) != 7 || b.Len() != 5 || b.Priority != nil {
		t.Fatalf("%d steps, %d items, %d priorities; want 7, 5, 0", len(rec.steps), b.Len(), len(b.Priority))
	}
	if s := a.Stats(); s.Transitions != 5 || s.Batches != 1 {
		t.Fatalf("stats %+v", s)
	}
	// An ended context: no step at all.
	var b2 buffer.Transitions
	if err := a.Fill(ctx, &b2); err != nil || b2.Len() != 0 || len(rec.steps) != 7 {
		t.Fatalf("Fill on an ended context: err %v, %d items, %d steps", err, b2.Len(), len(rec.steps))
	}
	// The episode carries on under a new context.
	if err := a.Fill(context.Background(), &b2); err != nil || b2.Len() != 50 {
		t.Fatalf("Fill after a cancelled one: err %v, %d items", err, b2.Len())
	}
}

// TestDeterministic: the same (Seed, ID) and snapshots give the same
// transitions; another seed or ID gives others.
func TestDeterministic(t *testing.T) {
	cfg := model.Config{In: 4, Hidden: []int{16}, Out: 2}
	run := func(c Config) *buffer.Transitions {
		net, st := glorot(t, cfg, 2)
		c.NumActors, c.LocalBatch, c.RefreshEvery = 4, 32, 50
		c.Columns = Columns{Episode: true, GlobalStep: true, ActorID: true}
		a, err := New(c, mustEnv(t, "CartPole-v1"), net, st, newPER(t, 4, 0.6, 1e-6))
		if err != nil {
			t.Fatal(err)
		}
		var all buffer.Transitions
		for range 20 {
			var b buffer.Transitions
			if err := a.Fill(context.Background(), &b); err != nil {
				t.Fatal(err)
			}
			appendAll(&all, &b)
		}
		return &all
	}
	x, y := run(Config{ID: 1, Seed: 42}), run(Config{ID: 1, Seed: 42})
	if !reflect.DeepEqual(x, y) {
		t.Fatal("same seed, different transitions")
	}
	if z := run(Config{ID: 1, Seed: 43}); reflect.DeepEqual(x.Obs, z.Obs) {
		t.Fatal("seeds 42 and 43 gave the same transitions")
	}
	if z := run(Config{ID: 2, Seed: 42}); reflect.DeepEqual(x.Obs, z.Obs) {
		t.Fatal("actors 1 and 2 gave the same transitions")
	}
}

// TestStats checks the episode statistics against the recording and reads
// them concurrently with Fill (for the race detector).
func TestStats(t *testing.T) {
	const window = 3
	rec := &recorder{Env: mustEnv(t, "CartPole-v1")}
	net, st := glorot(t, model.Config{In: 4, Hidden: []int{8}, Out: 2}, 3)
	a, _ := New(Config{StatsWindow: window, LocalBatch: 16}, rec, net, st, nil)
	if s := a.Stats(); s.Episodes != 0 || s.Steps != 0 || s.MeanReturn != 0 {
		t.Fatalf("initial stats %+v", s)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last Stats
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := a.Stats()
			if s.Steps < last.Steps || s.Episodes < last.Episodes {
				t.Errorf("stats went back: %+v after %+v", s, last)
				return
			}
			last = s
		}
	}()
	var b buffer.Transitions
	for range 40 {
		b = buffer.Transitions{}
		if err := a.Fill(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()

	var returns []float64
	var ret float64
	var length, lastLen int
	for _, s := range rec.steps {
		ret += s.res.Reward
		length++
		if s.res.Done() {
			returns = append(returns, ret)
			lastLen = length
			ret, length = 0, 0
		}
	}
	s := a.Stats()
	if len(returns) < window+1 {
		t.Fatalf("only %d episodes", len(returns))
	}
	tail := returns[len(returns)-window:]
	want := (tail[0] + tail[1] + tail[2]) / window
	if s.Steps != int64(len(rec.steps)) || s.Episodes != int64(len(returns)) || s.LastReturn != returns[len(returns)-1] ||
		math.Abs(s.MeanReturn-want) > 1e-12 || s.LastLength != lastLen || s.Transitions != 40*16 || s.Batches != 40 {
		t.Fatalf("stats %+v; want steps %d episodes %d last %v mean %v length %d", s, len(rec.steps), len(returns), returns[len(returns)-1], want, lastLen)
	}
}

// TestEpsilonDecay: with EpsilonDecaySteps the rate falls linearly from 1
// to the actor's rate, then stays there; the share of random actions
// follows it.
func TestEpsilonDecay(t *testing.T) {
	net, st := glorot(t, model.Config{In: 4, Hidden: []int{8}, Out: 2}, 3)
	a, err := New(Config{FixedEpsilon: true, Epsilon: 0.1, EpsilonDecaySteps: 1000, Seed: 2}, mustEnv(t, "CartPole-v1"), net, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		steps int64
		want  float64
	}{{0, 1}, {500, 0.55}, {1000, 0.1}, {5000, 0.1}} {
		if got := a.epsAt(c.steps); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("epsAt(%d) = %v, want %v", c.steps, got, c.want)
		}
	}
	if _, err := New(Config{EpsilonDecaySteps: -1}, mustEnv(t, "CartPole-v1"), net, st, nil); err == nil {
		t.Error("a negative EpsilonDecaySteps was accepted")
	}
}
