package actor

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
)

// squashedPolicy returns a linear squashed-Gaussian policy for boxEnv (2
// observations, 2 action dimensions: 4 outputs) whose outputs are the
// constants mu and logStd whatever the observation, and a Store holding
// it as version 1.
func squashedPolicy(t testing.TB, mu, logStd [2]float64) (*model.Net, *model.Store) {
	t.Helper()
	cfg := model.Config{In: 2, Out: 4}
	src, err := model.NewNet(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := src.Params()
	clear(p)
	copy(p[len(p)-4:], []float64{mu[0], mu[1], logStd[0], logStd[1]}) // the biases
	if out := src.Forward([]float64{3, 1}); (out[0] != mu[0] && !math.IsNaN(mu[0])) || out[3] != logStd[1] {
		t.Fatalf("the biases are not the last parameters: outputs %v", out)
	}
	net, _ := model.NewNet(cfg, nil)
	var st model.Store
	st.Publish(src.Snapshot(1))
	return net, &st
}

func fillSquashed(t testing.TB, s *Squashed, fills int) *buffer.Transitions {
	t.Helper()
	var all buffer.Transitions
	for range fills {
		var b buffer.Transitions
		if err := s.Fill(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if b.Priority != nil {
			t.Fatalf("a squashed actor handed over %d priorities", len(b.Priority))
		}
		appendAll(&all, &b)
	}
	return &all
}

func TestNewSquashedRejects(t *testing.T) {
	net, st := squashedPolicy(t, [2]float64{}, [2]float64{})
	tanhNet, _ := policy(t, 2, 2, nil, 1, 1)
	wide, _ := model.NewNet(model.Config{In: 2, Out: 4, OutAct: model.Tanh}, nil)
	cart, err := envs.Make("CartPole-v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  SquashedConfig
		env  envs.Env
		net  *model.Net
	}{
		{"nil env", SquashedConfig{}, nil, net},
		{"nil net", SquashedConfig{}, newBoxEnv(), nil},
		{"discrete", SquashedConfig{}, cart, net},
		{"TD3 policy", SquashedConfig{}, newBoxEnv(), tanhNet},
		{"bounded output", SquashedConfig{}, newBoxEnv(), wide},
		{"RandomSteps", SquashedConfig{RandomSteps: -1}, newBoxEnv(), net},
		{"ID", SquashedConfig{ID: 2, NumActors: 2}, newBoxEnv(), net},
	} {
		if _, err := NewSquashed(tc.cfg, tc.env, tc.net, st); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", tc.name, err)
		}
	}
}

// TestSquashedActions: before the first snapshot and during RandomSteps
// the actions are uniform in the box; then a = ScaleAction(tanh(μ +
// σ·z)): with σ at the clamp's floor every action is ScaleAction(tanh(μ)),
// and with σ = 0.4 the stored actions' atanh(UnscaleAction(a)) have mean
// μ and sd σ (4 standard errors, fixed seed); the stored action is the
// one sent, as float32 in the box. Mean plays tanh(μ) whatever σ.
func TestSquashedActions(t *testing.T) {
	const seed = 5
	mu := [2]float64{0.3, -0.8}
	box := newBoxEnv().box
	want := make([]float64, 2)
	ScaleAction(box, want, []float64{math.Tanh(mu[0]), math.Tanh(mu[1])})
	intoBox(box, want, nil)

	// Uniform before the snapshot, then the (noise-free) policy.
	env := newBoxEnv()
	net, full := squashedPolicy(t, mu, [2]float64{-30, -30}) // clamped to −20: σ ≈ 2e-9
	var empty model.Store
	s, err := NewSquashed(SquashedConfig{LocalBatch: 100, RefreshEvery: 1 << 20, Seed: seed}, env, net, &empty)
	if err != nil {
		t.Fatal(err)
	}
	checkUniform(t, seed, env.box, fillSquashed(t, s, 10).ActionVec)
	empty.Publish(full.Load())
	if ok, err := s.Update(); !ok || err != nil {
		t.Fatalf("Update: %v %v", ok, err)
	}
	from := len(env.steps)
	fillSquashed(t, s, 1)
	for k, st := range env.steps[from:] {
		if math.Abs(st.action[0]-want[0]) > 1e-6 || math.Abs(st.action[1]-want[1]) > 1e-6 {
			t.Fatalf("step %d played %v, want ScaleAction(tanh(μ)) = %v", from+k, st.action, want)
		}
	}

	// RandomSteps, then samples of the policy.
	env = newBoxEnv()
	const logStd = -0.9162907318741551 // log 0.4
	net, st := squashedPolicy(t, mu, [2]float64{logStd, logStd})
	s, err = NewSquashed(SquashedConfig{RandomSteps: 500, LocalBatch: 100, Seed: seed}, env, net, st)
	if err != nil {
		t.Fatal(err)
	}
	all := fillSquashed(t, s, 45)
	var head []float32
	var sum, sum2 [2]float64
	n := 0
	for k, step := range env.steps[:all.Len()] { // the steps handed over (in order: one transition per step)
		a32 := all.ActionVec[2*k : 2*k+2]
		if float64(a32[0]) != step.action[0] || float64(a32[1]) != step.action[1] || !box.Contains(step.action) {
			t.Fatalf("step %d: sent %v, stored %v", k, step.action, a32)
		}
		if k < 500 {
			head = append(head, a32...)
			continue
		}
		u := make([]float64, 2)
		UnscaleAction(box, u, step.action)
		for j := range 2 {
			z := math.Atanh(max(-1+1e-7, min(1-1e-7, u[j])))
			sum[j] += z
			sum2[j] += z * z
		}
		n++
	}
	checkUniform(t, seed, box, head)
	for j := range 2 {
		m := sum[j] / float64(n)
		sd := math.Sqrt(sum2[j]/float64(n) - m*m)
		if se := 0.4 / math.Sqrt(float64(n)); math.Abs(m-mu[j]) > 4*se || math.Abs(sd-0.4) > 4*0.4/math.Sqrt(2*float64(n)) {
			t.Errorf("seed %d, dimension %d: atanh of the actions has mean %v, sd %v over %d steps; want %v, 0.4", seed, j, m, sd, n, mu[j])
		}
	}

	// Mean: tanh(μ) although σ = 0.4.
	env = newBoxEnv()
	net, st = squashedPolicy(t, mu, [2]float64{logStd, logStd})
	s, err = NewSquashed(SquashedConfig{Mean: true, LocalBatch: 10, Seed: seed}, env, net, st)
	if err != nil {
		t.Fatal(err)
	}
	fillSquashed(t, s, 2)
	for k, step := range env.steps {
		if math.Abs(step.action[0]-want[0]) > 1e-6 || math.Abs(step.action[1]-want[1]) > 1e-6 {
			t.Fatalf("Mean: step %d played %v, want %v", k, step.action, want)
		}
	}
}

// TestEvaluateSquashed: the evaluator plays ScaleAction(tanh(μ(s))), the
// same actions and returns as EvaluateContinuous with a tanh policy whose
// outputs are μ's, and refuses a network that does not fit.
func TestEvaluateSquashed(t *testing.T) {
	env, err := envs.Make("Pendulum-v1")
	if err != nil {
		t.Fatal(err)
	}
	sq, err := model.NewNet(model.Config{In: 3, Hidden: []int{8}, Out: 2, Act: model.Tanh}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sq.Params() {
		sq.Params()[i] = math.Sin(float64(i)) // any fixed parameters
	}
	// A TD3-style policy 3→8→1 (tanh output) with the same hidden layer
	// and the mean's output row.
	td, err := model.NewNet(model.Config{In: 3, Hidden: []int{8}, Out: 1, Act: model.Tanh, OutAct: model.Tanh}, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := []float64{0.3, -0.2, 0.5}
	hid := 3*8 + 8
	copy(td.Params()[:hid], sq.Params()[:hid])
	for try := range 2 { // find the output layer's layout: weights row- or column-major
		p := td.Params()[hid:]
		for k := range 8 {
			if try == 0 {
				p[k] = sq.Params()[hid+2*k]
			} else {
				p[k] = sq.Params()[hid+k]
			}
		}
		p[8] = sq.Params()[hid+16]
		if math.Abs(td.Forward(x)[0]-math.Tanh(sq.Forward(x)[0])) < 1e-12 {
			break
		}
	}
	if math.Abs(td.Forward(x)[0]-math.Tanh(sq.Forward(x)[0])) > 1e-12 {
		t.Fatal("could not build the equivalent tanh policy")
	}
	got, rets, err := EvaluateSquashed(context.Background(), env, sq, nil, 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	env2, _ := envs.Make("Pendulum-v1")
	want, wrets, err := EvaluateContinuous(context.Background(), env2, td, nil, 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || len(rets) != 3 || rets[2] != wrets[2] {
		t.Errorf("EvaluateSquashed %v %v, EvaluateContinuous of tanh(μ) %v %v", got, rets, want, wrets)
	}
	if _, _, err := EvaluateSquashed(context.Background(), env, td, nil, 1, 1); !errors.Is(err, ErrConfig) {
		t.Errorf("a tanh policy: %v, want ErrConfig", err)
	}
}

// TestSquashedFillRefuses: a nil ctx or batch, a batch with priorities, a
// Fill or Update during another Fill, and a policy that returns NaN are
// errors; the actor works normally after the overlap.
func TestSquashedFillRefuses(t *testing.T) {
	env := newBoxEnv()
	net, st := squashedPolicy(t, [2]float64{0.1, 0.2}, [2]float64{-1, -1})
	s, err := NewSquashed(SquashedConfig{LocalBatch: 4}, env, net, st)
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	if err := s.Fill(nilCtx, &buffer.Transitions{}); !errors.Is(err, ErrConfig) {
		t.Errorf("nil ctx: %v", err)
	}
	if err := s.Fill(context.Background(), nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil batch: %v", err)
	}
	if err := s.Fill(context.Background(), &buffer.Transitions{Priority: []float64{1}}); err == nil {
		t.Error("a batch with priorities was accepted")
	}
	if s.Stats().Steps != 0 {
		t.Fatal("refused Fills stepped the environment")
	}

	entered, release := make(chan struct{}), make(chan struct{})
	env.onStep = func(n int) {
		if n == 1 {
			entered <- struct{}{}
			<-release
		}
	}
	done := make(chan error)
	go func() { done <- s.Fill(context.Background(), &buffer.Transitions{}) }()
	<-entered
	if err := s.Fill(context.Background(), &buffer.Transitions{}); !errors.Is(err, ErrBusy) {
		t.Errorf("overlapping Fill: %v, want ErrBusy", err)
	}
	if _, err := s.Update(); !errors.Is(err, ErrBusy) {
		t.Errorf("Update during Fill: %v, want ErrBusy", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var tr buffer.Transitions
	if err := s.Fill(context.Background(), &tr); err != nil || tr.Len() != 4 {
		t.Fatalf("a Fill after the overlap: %d transitions, %v", tr.Len(), err)
	}

	nan, nst := squashedPolicy(t, [2]float64{math.NaN(), 0}, [2]float64{0, 0})
	bad, err := NewSquashed(SquashedConfig{LocalBatch: 4}, newBoxEnv(), nan, nst)
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Fill(context.Background(), &buffer.Transitions{}); !errors.Is(err, model.ErrNonFinite) {
		t.Errorf("a NaN policy: %v, want model.ErrNonFinite", err)
	}
}
