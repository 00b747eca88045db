package learner

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

var ctx = context.Background()

// The hand-computed case. Two one-hot states, two actions, linear
// networks Q(x)[a] = Σ_i x_i·W[i,a] (b = 0):
//
//	online  Q(s1) = [1, 2]    argmax 1      target  Q(s1) = [20, 10]   argmax 0
//	        Q(s2) = [3, 0]    argmax 0              Q(s2) = [30, 40]   argmax 1
//
// so on both states the online network's greedy action is not the target
// network's: Double DQN reads Q_target(s', argmax Q_online(s')), which is
// 30 at s2 and 10 at s1 (plain DQN's max would read 40 and 20).
var (
	s1, s2       = []float32{1, 0}, []float32{0, 1}
	onlineParams = []float64{1, 2, 3, 0, 0, 0}
	targetParams = []float64{20, 10, 30, 40, 0, 0}
	handItems    = []item{
		{obs: s1, a: 0, r: 1, d: 0.9, next: s2},    // 1-step: y = 1 + 0.9·30
		{obs: s2, a: 1, r: 2, d: 0, next: s1},      // terminal: y = 2
		{obs: s2, a: 0, r: 0.5, d: 0.81, next: s1}, // 2-step: y = 0.5 + 0.81·10
		{obs: s1, a: 1, r: -1, d: 0.729, next: s1}, // 3-step: y = −1 + 0.729·10
	}
)

// handCase returns the expected target and Q(s, a) of the hand item with
// observation obs and action a, computed from the table above with the
// buffer's float32 discounts.
func handCase(t *testing.T, obs []float32, a int32) (y, q float64) {
	t.Helper()
	f := func(x float32) float64 { return float64(x) }
	switch {
	case obs[0] == 1 && a == 0:
		return 1 + f(0.9)*30, 1
	case obs[1] == 1 && a == 1:
		return 2, 0
	case obs[1] == 1 && a == 0:
		return 0.5 + f(0.81)*10, 3
	case obs[0] == 1 && a == 1:
		return -1 + f(0.729)*10, 2
	}
	t.Fatalf("row with obs %v action %d is not a hand item", obs, a)
	return 0, 0
}

func newHand(t *testing.T, cfg DQNConfig, sel sampler.Selector, w sampler.Weighter, buf *buffer.Buffer) *DQN {
	t.Helper()
	net := linearNet(t, 2, 2, onlineParams)
	l, err := NewDQN(cfg, net, buf, method("hand", sel, w), nil)
	if err != nil {
		t.Fatal(err)
	}
	setParams(t, l.target, targetParams)
	return l
}

// TestTargetsByHand: Double-DQN n-step targets, terminal rows not
// bootstrapped, the stored discount used as is (not multiplied by γ
// again), the argmax from the online network and the value from the
// target network; TD errors, the loss and its gradient from the same
// forward pass.
func TestTargetsByHand(t *testing.T) {
	buf := newBuffer(t, 4, 2)
	insert(t, buf, handItems...)
	l := newHand(t, DQNConfig{Batch: 4}, sampler.NewUniform(buf), nil, buf)
	if err := l.Step(ctx); err != nil {
		t.Fatal(err)
	}
	b := l.batch
	var wantLoss float64
	for i := range 4 {
		obs, next, a := b.Obs[2*i:2*i+2], b.NextObs[2*i:2*i+2], b.Action[i]
		y, q := handCase(t, obs, a)
		if l.y[i] != y {
			t.Errorf("row %d (obs %v, a %d): target %v, want %v", i, obs, a, l.y[i], y)
		}
		if l.qsa[i] != q {
			t.Errorf("row %d: Q(s,a) %v, want %v", i, l.qsa[i], q)
		}
		if l.absTD[i] != math.Abs(y-q) {
			t.Errorf("row %d: |TD| %v, want %v", i, l.absTD[i], math.Abs(y-q))
		}
		// a* = argmax of the online network at s': 1 at s1, 0 at s2.
		wantA := int32(1)
		if next[1] == 1 {
			wantA = 0
		}
		if b.Discount[i] != 0 && l.astar[i] != wantA {
			t.Errorf("row %d: a* = %d, want %d (online argmax)", i, l.astar[i], wantA)
		}
		// The gradient reaches only Q(s, a_taken).
		for k := range int32(2) {
			g := l.dq[2*i+int(k)]
			if k == a && g == 0 {
				t.Errorf("row %d: dL/dQ(s, a_taken) = 0", i)
			}
			if k != a && g != 0 {
				t.Errorf("row %d: dL/dQ(s, %d) = %v for an action not taken", i, k, g)
			}
		}
		d := math.Abs(y - q) // every |δ| here exceeds Huber's delta 1
		wantLoss += d - 0.5
	}
	wantLoss /= 4
	if got := l.Stats().Loss; math.Abs(got-wantLoss) > 1e-12 {
		t.Errorf("loss %v, want %v", got, wantLoss)
	}
}

// TestLossTouchesOnlyTakenAction: when every replayed transition took
// action 0, the parameters that only feed Q(·, 1) (column 1 of W, b[1])
// stay bit-identical through many Adam steps.
func TestLossTouchesOnlyTakenAction(t *testing.T) {
	buf := newBuffer(t, 4, 2)
	items := slices.Clone(handItems)
	for i := range items {
		items[i].a = 0
	}
	insert(t, buf, items...)
	l := newHand(t, DQNConfig{Batch: 4, TargetEvery: 3}, sampler.NewUniform(buf), nil, buf)
	before := params(l.net)
	for range 20 {
		if err := l.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	after := l.net.Params()
	for _, i := range []int{1, 3, 5} { // W[0,1], W[1,1], b[1]
		if after[i] != before[i] {
			t.Errorf("param %d (%s) moved %v → %v, but action 1 was never taken", i, l.net.Where(i), before[i], after[i])
		}
	}
	for _, i := range []int{0, 2, 4} {
		if after[i] == before[i] {
			t.Errorf("param %d (%s) did not move", i, l.net.Where(i))
		}
	}
}

// TestPriorityWriteBack: the priorities the buffer stores after a step are
// PER's (|δ|+eps)^alpha of the TD errors computed by hand.
func TestPriorityWriteBack(t *testing.T) {
	const alpha, eps = 0.5, 0.01
	buf := newBuffer(t, 4, 2)
	insert(t, buf, handItems...)
	per, err := sampler.NewPER(buf, sampler.PERConfig{Alpha: alpha, Eps: eps, Beta: sampler.Linear{Start: 1, End: 1}})
	if err != nil {
		t.Fatal(err)
	}
	l := newHand(t, DQNConfig{Batch: 4}, per, per, buf)
	if err := l.Step(ctx); err != nil {
		t.Fatal(err)
	}
	b := l.batch
	for i := range 4 {
		y, q := handCase(t, b.Obs[2*i:2*i+2], b.Action[i])
		want := math.Pow(math.Abs(y-q)+eps, alpha)
		ref, got, ok := buf.SlotPriority(int(b.Refs[i].Slot))
		if !ok || ref != b.Refs[i] {
			t.Fatalf("row %d: slot %d no longer holds the sampled item", i, b.Refs[i].Slot)
		}
		if math.Abs(got-want) > buf.Resolution() {
			t.Errorf("row %d: stored priority %v, want (|δ|+eps)^alpha = %v (|δ| = %v)", i, got, want, math.Abs(y-q))
		}
	}
	st := l.Stats()
	if st.WriteBacks != 4 || st.StaleWriteBacks != 0 {
		t.Errorf("write-backs %d applied, %d stale; want 4, 0", st.WriteBacks, st.StaleWriteBacks)
	}
}

// overwriter is a Selector that, between Sample and Update, overwrites
// every slot of the buffer, as concurrent actors would.
type overwriter struct {
	*sampler.Uniform
	t   *testing.T
	buf *buffer.Buffer
}

func (o overwriter) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	if err := o.Uniform.Sample(rng, dst); err != nil {
		return err
	}
	insert(o.t, o.buf, handItems...)
	return nil
}

// TestStaleWriteBacks: write-backs for items overwritten since they were
// sampled are dropped by the buffer and counted, and the step succeeds.
func TestStaleWriteBacks(t *testing.T) {
	buf := newBuffer(t, 4, 2)
	insert(t, buf, handItems...)
	sel := overwriter{Uniform: sampler.NewUniform(buf), t: t, buf: buf}
	l := newHand(t, DQNConfig{Batch: 4}, sel, nil, buf)
	for range 3 {
		if err := l.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if st := l.Stats(); st.StaleWriteBacks != 12 || st.WriteBacks != 0 {
		t.Errorf("stale %d, applied %d; want 12, 0", st.StaleWriteBacks, st.WriteBacks)
	}
}

// TestNaNReward: a NaN in the data stops the step with an error naming
// the step and the loss, before anything changes.
func TestNaNReward(t *testing.T) {
	buf := newBuffer(t, 4, 2)
	items := slices.Clone(handItems)
	insert(t, buf, items...)
	l := newHand(t, DQNConfig{Batch: 4}, sampler.NewUniform(buf), nil, buf)
	for range 2 {
		if err := l.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The buffer refuses NaN data, so the NaN comes from the target
	// network (its last output bias): every bootstrap target is NaN.
	tp := l.target.Params()
	tp[len(tp)-1] = math.NaN()
	before, adamSteps := params(l.net), l.adam.Steps()
	err := l.Step(ctx)
	var nf *model.NonFiniteError
	if !errors.As(err, &nf) || !errors.Is(err, model.ErrNonFinite) || nf.What != "loss" {
		t.Fatalf("Step = %v, want a *model.NonFiniteError on the loss", err)
	}
	if !strings.Contains(err.Error(), "step 3") || !strings.Contains(err.Error(), "loss") {
		t.Errorf("error %q does not name step 3 and the loss", err)
	}
	if l.Steps() != 2 || l.Stats().Steps != 2 || !slices.Equal(before, l.net.Params()) || l.adam.Steps() != adamSteps {
		t.Errorf("a failed step changed the learner: steps %d, adam %d", l.Steps(), l.adam.Steps())
	}
}

// TestNonFiniteParams: an update that overflows the parameters is
// reported with the parameter's place in the network.
func TestNonFiniteParams(t *testing.T) {
	buf := newBuffer(t, 4, 2)
	insert(t, buf, handItems...)
	l := newHand(t, DQNConfig{Batch: 4, LR: math.MaxFloat64}, sampler.NewUniform(buf), nil, buf)
	err := l.Step(ctx)
	var nf *model.NonFiniteError
	if !errors.As(err, &nf) || nf.What != "params" || nf.Where == "" {
		t.Fatalf("Step = %v, want a *model.NonFiniteError on a parameter with its place", err)
	}
	if !strings.Contains(err.Error(), "step 1") {
		t.Errorf("error %q does not name step 1", err)
	}
	if l.Steps() != 0 {
		t.Errorf("steps = %d after a failed step", l.Steps())
	}
}

// TestBadAction: a buffer without NumActions accepts any action; the
// learner refuses one outside its network's outputs with an error rather
// than a panic.
func TestBadAction(t *testing.T) {
	buf := newBuffer(t, 4, 2)
	items := slices.Clone(handItems)
	items[1].a = 5
	insert(t, buf, items...)
	l := newHand(t, DQNConfig{Batch: 4}, sampler.NewUniform(buf), nil, buf)
	if err := l.Step(ctx); !errors.Is(err, ErrAction) {
		t.Fatalf("Step = %v, want ErrAction", err)
	}
}

// TestEmptyBuffer: sampling errors pass through, naming the step.
func TestEmptyBuffer(t *testing.T) {
	buf := newBuffer(t, 4, 2)
	l := newHand(t, DQNConfig{Batch: 4}, sampler.NewUniform(buf), nil, buf)
	if err := l.Step(ctx); !errors.Is(err, buffer.ErrEmpty) || !strings.Contains(err.Error(), "step 1") {
		t.Fatalf("Step = %v, want buffer.ErrEmpty naming step 1", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Step(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Step(cancelled) = %v", err)
	}
}

// TestHardTargetUpdate: the target network holds its initial parameters
// until step TargetEvery, then the online network's exactly.
func TestHardTargetUpdate(t *testing.T) {
	r := newRig(t, DQNConfig{Batch: 8, TargetEvery: 3}, model.Config{In: 3, Hidden: []int{8}, Out: 2}, 64)
	l := r.l
	init := params(l.target)
	for step := 1; step <= 7; step++ {
		if err := l.Step(ctx); err != nil {
			t.Fatal(err)
		}
		switch step {
		case 1, 2:
			if !slices.Equal(l.target.Params(), init) {
				t.Fatalf("step %d: target moved before TargetEvery", step)
			}
		case 3, 6:
			if !slices.Equal(l.target.Params(), l.net.Params()) {
				t.Fatalf("step %d: target is not a copy of the online network", step)
			}
		default:
			if slices.Equal(l.target.Params(), l.net.Params()) {
				t.Fatalf("step %d: target follows the online network between copies", step)
			}
		}
	}
	if got := l.Stats().TargetUpdates; got != 2 {
		t.Errorf("TargetUpdates = %d, want 2", got)
	}
}

// TestPolyakTargetUpdate: with Tau > 0 the target moves every step by
// θ⁻ ← τ·θ + (1−τ)·θ⁻.
func TestPolyakTargetUpdate(t *testing.T) {
	const tau = 0.25
	r := newRig(t, DQNConfig{Batch: 8, Tau: tau, TargetEvery: 1}, model.Config{In: 3, Hidden: []int{8}, Out: 2}, 64)
	l := r.l
	for step := 1; step <= 5; step++ {
		want := params(l.target)
		if err := l.Step(ctx); err != nil {
			t.Fatal(err)
		}
		model.Polyak(want, l.net.Params(), tau)
		if !slices.Equal(l.target.Params(), want) {
			t.Fatalf("step %d: target is not the Polyak average", step)
		}
		if slices.Equal(l.target.Params(), l.net.Params()) {
			t.Fatalf("step %d: target equals the online network", step)
		}
	}
	if got := l.Stats().TargetUpdates; got != 5 {
		t.Errorf("TargetUpdates = %d, want 5", got)
	}
}

// TestPublishCadence: version 0 at construction, then a snapshot of the
// online parameters every PublishEvery steps, versioned by the step.
func TestPublishCadence(t *testing.T) {
	r := newRig(t, DQNConfig{Batch: 8, PublishEvery: 3}, model.Config{In: 3, Hidden: []int{8}, Out: 2}, 64)
	l, store := r.l, r.store
	if p := store.Load(); p == nil || p.Version() != 0 || !slices.Equal(p.Weights(), l.net.Params()) {
		t.Fatal("NewDQN did not publish the initial parameters as version 0")
	}
	for step := uint64(1); step <= 7; step++ {
		if err := l.Step(ctx); err != nil {
			t.Fatal(err)
		}
		want := step / 3 * 3
		p := store.Load()
		if p.Version() != want {
			t.Fatalf("step %d: store holds version %d, want %d", step, p.Version(), want)
		}
		if step%3 == 0 && !slices.Equal(p.Weights(), l.net.Params()) {
			t.Fatalf("step %d: published weights differ from the online network", step)
		}
	}
	if st := l.Stats(); st.Publishes != 3 || st.Version != 6 {
		t.Errorf("Publishes %d, Version %d; want 3, 6", st.Publishes, st.Version)
	}
}

// TestZeroAllocs: after warm-up a Step allocates nothing but the published
// snapshot (a Params and its vector).
func TestZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation may allocate")
	}
	for _, tc := range []struct {
		name    string
		every   int
		want    float64
		dueling bool
	}{
		{"no-publish", 1 << 30, 0, false},
		{"no-publish/dueling", 1 << 30, 0, true},
		{"publish-every-step", 1, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := benchCfg
			nc.Dueling = tc.dueling
			r := newRig(t, DQNConfig{Batch: 64, PublishEvery: tc.every, TargetEvery: 5}, nc, 4096)
			step := func() {
				if err := r.l.Step(ctx); err != nil {
					t.Fatal(err)
				}
			}
			step()
			if a := testing.AllocsPerRun(50, step); a != tc.want {
				t.Errorf("Step: %v allocations, want %v", a, tc.want)
			}
			if a := testing.AllocsPerRun(50, func() { _ = r.l.Stats() }); a != 0 {
				t.Errorf("Stats: %v allocations, want 0", a)
			}
		})
	}
}

// TestConcurrentStats: Stats from other goroutines and inserts from an
// actor while the learner steps (run with -race).
func TestConcurrentStats(t *testing.T) {
	r := newRig(t, DQNConfig{Batch: 16, PublishEvery: 2}, model.Config{In: 4, Hidden: []int{16}, Out: 2}, 256)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			st := r.l.Stats()
			if st.Steps < last {
				t.Errorf("Steps went back from %d to %d", last, st.Steps)
				return
			}
			last = st.Steps
			_ = r.store.Load()
		}
	}()
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, 3))
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := r.buf.Insert(randomTransitions(rng, 16, 4, 2)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 200 {
		if err := r.l.Step(ctx); err != nil {
			t.Error(err)
			break
		}
	}
	close(stop)
	wg.Wait()
	if st := r.l.Stats(); st.Steps != 200 || st.Publishes != 101 {
		t.Errorf("stats %+v", st)
	}
}

// TestNewDQNErrors: parts that do not fit together are refused.
func TestNewDQNErrors(t *testing.T) {
	net := linearNet(t, 2, 2, onlineParams)
	buf := newBuffer(t, 4, 2)
	m := method("uniform", sampler.NewUniform(buf), nil)
	badLoss := m
	badLoss.Loss = model.Loss{Kind: model.Huber, Delta: -1}
	cont, err := buffer.New(buffer.Config{Capacity: 4, ObsDim: 2, Action: buffer.Continuous, ActionDim: 1})
	if err != nil {
		t.Fatal(err)
	}
	many, err := buffer.New(buffer.Config{Capacity: 4, ObsDim: 2, NumActions: 3})
	if err != nil {
		t.Fatal(err)
	}
	nan := linearNet(t, 2, 2, []float64{0, 0, math.NaN(), 0, 0, 0})
	for name, mk := range map[string]func() (*DQN, error){
		"nil net":      func() (*DQN, error) { return NewDQN(DQNConfig{Batch: 2}, nil, buf, m, nil) },
		"nil buffer":   func() (*DQN, error) { return NewDQN(DQNConfig{Batch: 2}, net, nil, m, nil) },
		"nil selector": func() (*DQN, error) { return NewDQN(DQNConfig{Batch: 2}, net, buf, sampler.Method{Name: "none"}, nil) },
		"bad loss":     func() (*DQN, error) { return NewDQN(DQNConfig{Batch: 2}, net, buf, badLoss, nil) },
		"obs width":    func() (*DQN, error) { return NewDQN(DQNConfig{Batch: 2}, net, newBuffer(t, 4, 3), m, nil) },
		"continuous":   func() (*DQN, error) { return NewDQN(DQNConfig{Batch: 2}, net, cont, m, nil) },
		"num actions":  func() (*DQN, error) { return NewDQN(DQNConfig{Batch: 2}, net, many, m, nil) },
		"batch > cap":  func() (*DQN, error) { return NewDQN(DQNConfig{Batch: 5}, net, buf, m, nil) },
		"bad config":   func() (*DQN, error) { return NewDQN(DQNConfig{Batch: -1}, net, buf, m, nil) },
		"nan init":     func() (*DQN, error) { return NewDQN(DQNConfig{Batch: 2}, nan, buf, m, nil) },
	} {
		if l, err := mk(); !errors.Is(err, ErrConfig) || l != nil {
			t.Errorf("%s: NewDQN = %v, %v; want an ErrConfig error", name, l, err)
		}
	}
}

// TestPALMethodScale: under the PAL method the loss of the hand batch is
// (1/B)·Σ_i c·ρ_PAL(δ_i) with c = 1/λ̂ = B / Σ_i max(|δ_i|, k)^α, computed
// here by hand from the hand table; k = 3 puts one row (|δ| = 2) on the
// quadratic side of ρ_PAL and the others beyond. The gradient at the taken
// action is c·max(|δ|, k)^α·clip(δ, −k, k)/B.
func TestPALMethodScale(t *testing.T) {
	const k, alpha = 3.0, 0.5
	buf := newBuffer(t, 4, 2)
	insert(t, buf, handItems...)
	m, err := sampler.NewMethod("pal", buf, sampler.MethodConfig{LAP: &sampler.LAPConfig{Alpha: alpha, K: k}})
	if err != nil {
		t.Fatal(err)
	}
	net := linearNet(t, 2, 2, onlineParams)
	l, err := NewDQN(DQNConfig{Batch: 4}, net, buf, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	setParams(t, l.target, targetParams)
	if err := l.Step(ctx); err != nil {
		t.Fatal(err)
	}
	b := l.batch
	var lam float64
	delta := make([]float64, 4)
	for i := range 4 {
		y, q := handCase(t, b.Obs[2*i:2*i+2], b.Action[i])
		delta[i] = q - y
		lam += math.Pow(math.Max(math.Abs(delta[i]), k), alpha) / 4
	}
	c := 1 / lam
	var want float64
	quad := false
	for i, d := range delta {
		a := math.Abs(d)
		quad = quad || a <= k
		rho := 0.5 * math.Pow(k, alpha) * d * d
		if a > k {
			rho = k * math.Pow(a, 1+alpha) / (1 + alpha)
		}
		want += c * rho / 4
		g := c * math.Pow(math.Max(a, k), alpha) * math.Max(-k, math.Min(k, d)) / 4
		if got := l.dq[2*i+int(b.Action[i])]; math.Abs(got-g) > 1e-12*math.Abs(g) {
			t.Errorf("row %d (δ %v): dL/dQ %v, want %v", i, d, got, g)
		}
	}
	if got := l.Stats().Loss; math.Abs(got-want) > 1e-12*want {
		t.Errorf("loss %v, want %v (1/λ̂ = %v)", got, want, c)
	}
	if !quad {
		t.Error("no sampled row has |δ| <= k: ρ_PAL's quadratic side was not exercised (pick another seed)")
	}
}

// TestLAPMethodWriteBack: under the LAP method the priorities written back
// are max(|δ|, k)^α of the hand TD errors (k = 3 floors the |δ| = 2 row),
// and the loss is Huber(k) with no importance weights.
func TestLAPMethodWriteBack(t *testing.T) {
	const k, alpha = 3.0, 0.4
	buf, err := buffer.New(buffer.Config{Capacity: 4, ObsDim: 2, InitialPriority: 2}) // >= k^α
	if err != nil {
		t.Fatal(err)
	}
	insert(t, buf, handItems...)
	m, err := sampler.NewMethod("lap", buf, sampler.MethodConfig{LAP: &sampler.LAPConfig{Alpha: alpha, K: k}})
	if err != nil {
		t.Fatal(err)
	}
	net := linearNet(t, 2, 2, onlineParams)
	l, err := NewDQN(DQNConfig{Batch: 4}, net, buf, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	setParams(t, l.target, targetParams)
	if err := l.Step(ctx); err != nil {
		t.Fatal(err)
	}
	b := l.batch
	var wantLoss float64
	floored := false
	for i := range 4 {
		y, q := handCase(t, b.Obs[2*i:2*i+2], b.Action[i])
		d := math.Abs(y - q)
		floored = floored || d < k
		wantLoss += m.Loss.Rho(q-y) / 4
		want := math.Pow(math.Max(d, k), alpha)
		ref, got, ok := buf.SlotPriority(int(b.Refs[i].Slot))
		if !ok || ref != b.Refs[i] {
			t.Fatalf("row %d: slot %d no longer holds the sampled item", i, b.Refs[i].Slot)
		}
		if math.Abs(got-want) > buf.Resolution() {
			t.Errorf("row %d: stored priority %v, want max(|δ|, k)^α = %v (|δ| = %v)", i, got, want, d)
		}
	}
	if got := l.Stats().Loss; math.Abs(got-wantLoss) > 1e-12*wantLoss {
		t.Errorf("loss %v, want mean Huber(%v) %v", got, k, wantLoss)
	}
	if !floored {
		t.Error("the sampled batch has no |δ| below k: the floor was not exercised (pick another seed)")
	}
}

// failingNormalizer refuses every batch.
type failingNormalizer struct{}

func (failingNormalizer) Scale([]float64) (float64, error) { return 0, errors.New("no scale") }

// TestNormalizerError: a Normalizer error fails the step before anything
// changes.
func TestNormalizerError(t *testing.T) {
	buf := newBuffer(t, 4, 2)
	insert(t, buf, handItems...)
	m := method("broken", sampler.NewUniform(buf), nil)
	m.Normalizer = failingNormalizer{}
	l, err := NewDQN(DQNConfig{Batch: 4}, linearNet(t, 2, 2, onlineParams), buf, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := params(l.net)
	if err := l.Step(ctx); err == nil || !strings.Contains(err.Error(), "no scale") || !strings.Contains(err.Error(), "step 1") {
		t.Fatalf("Step = %v, want the normalizer's error naming step 1", err)
	}
	if l.Steps() != 0 || l.adam.Steps() != 0 || !slices.Equal(before, l.net.Params()) {
		t.Error("a failed step changed the learner")
	}
}

// TestNaNRewardPAL: under a method with a Normalizer a NaN in the data is
// reported as a non-finite TD error (not as the normaliser's refusal), with
// nothing changed.
func TestNaNRewardPAL(t *testing.T) {
	buf := newBuffer(t, 4, 2)
	insert(t, buf, handItems...)
	m, err := sampler.NewMethod("pal", buf, sampler.MethodConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewDQN(DQNConfig{Batch: 4}, linearNet(t, 2, 2, onlineParams), buf, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	tp := l.target.Params() // the buffer refuses NaN data: the NaN comes from the target network
	tp[len(tp)-1] = math.NaN()
	before := params(l.net)
	var nf *model.NonFiniteError
	if err := l.Step(ctx); !errors.As(err, &nf) || nf.What != "TD error" || nf.Where != "" || !strings.Contains(err.Error(), "step 1") {
		t.Fatalf("Step = %v, want a non-finite TD error at step 1, with no place in the network (it indexes a row)", err)
	}
	if l.Steps() != 0 || !slices.Equal(before, l.net.Params()) {
		t.Error("a failed step changed the learner")
	}
}
