package actor

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/badinput"
	"github.com/apexrl/apex/model"
)

func TestConfigsRefuseNonFinite(t *testing.T) {
	badinput.CheckNonFinite(t, Config{}, ErrConfig, Config.Validate)
	badinput.CheckNonFinite(t, Config{FixedEpsilon: true}, ErrConfig, Config.Validate)
	badinput.CheckNonFinite(t, ContinuousConfig{}, ErrConfig, ContinuousConfig.Validate)
	badinput.CheckNonFinite(t, GaussianConfig{Columns: Columns{Episode: true}}, ErrConfig, GaussianConfig.Validate)
}

// TestBadInputReturnsErrors: constructors refuse nil parts, sizes that
// would exhaust memory and bad counts with ErrConfig instead of panicking.
func TestBadInputReturnsErrors(t *testing.T) {
	env := mustEnv(t, "CartPole-v1")
	net, _ := model.NewNet(model.Config{In: 4, Out: 2}, nil)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		f    func() error
		text string
	}{
		{"New nil env", func() error { _, err := New(Config{}, nil, net, nil, nil); return err }, "environment"},
		{"New nil net", func() error { _, err := New(Config{}, env, nil, nil, nil); return err }, "network"},
		{"NewContinuous nil", func() error { _, err := NewContinuous(ContinuousConfig{}, nil, nil, nil); return err }, "environment"},
		{"NewGaussian nil", func() error {
			_, err := NewGaussian(GaussianConfig{Columns: Columns{Episode: true}, Behaviour: gaussBehaviour()}, nil, nil, nil)
			return err
		}, "environment"},
		{"Config huge StatsWindow", func() error { return Config{StatsWindow: math.MaxInt}.Validate() }, "StatsWindow"},
		{"Config huge LocalBatch", func() error { return Config{LocalBatch: math.MaxInt}.Validate() }, "LocalBatch"},
		{"Config huge NStep", func() error { return Config{NStep: math.MaxInt}.Validate() }, "NStep"},
		{"NewNStep huge n", func() error { _, err := NewNStep(math.MaxInt, 0.9, 4); return err }, "n-step length"},
		{"NewNStep huge obs", func() error { _, err := NewNStep(3, 0.9, math.MaxInt); return err }, "observation size"},
		{"NewNStep window", func() error { _, err := NewNStep(1<<20, 0.9, 1<<20); return err }, "exceeds"},
		{"NewNStep NaN gamma", func() error { _, err := NewNStep(3, math.NaN(), 4); return err }, "gamma"},
		{"NewNStepContinuous huge action", func() error { _, err := NewNStepContinuous(3, 0.9, 4, math.MaxInt); return err }, "action size"},
		{"NewProjection d 0", func() error { _, err := NewProjection(4, 0, 1); return err }, "d must be"},
		{"NewProjection negative obsDim", func() error { _, err := NewProjection(-4, 3, 1); return err }, "obsDim must be"},
		{"Evaluate nil env", func() error { _, _, err := Evaluate(canceled, nil, net, nil, 1, 1); return err }, "environment"},
		{"Evaluate 0 episodes", func() error { _, _, err := Evaluate(canceled, env, net, nil, 0, 1); return err }, "episodes"},
	} {
		err := badinput.NoPanic(t, c.name, c.f)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v, want ErrConfig saying %q", c.name, err, c.text)
		}
	}
	// A huge episode count is not preallocated: a cancelled evaluation
	// returns at once with ctx's error.
	err := badinput.NoPanic(t, "Evaluate MaxInt episodes", func() error {
		_, _, err := Evaluate(canceled, env, net, nil, math.MaxInt, 1)
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Evaluate of MaxInt episodes under a cancelled ctx: %v, want context.Canceled", err)
	}
}

// TestFillRefusesNil: Fill with a nil context or batch returns ErrConfig
// before stepping the environment.
func TestFillRefusesNil(t *testing.T) {
	net, st := linear(t, 4, 2, make([]float64, model.DenseParams(4, 2)))
	a, err := New(Config{}, mustEnv(t, "CartPole-v1"), net, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	for name, f := range map[string]func() error{
		"nil ctx":   func() error { return a.Fill(nilCtx, &buffer.Transitions{}) },
		"nil batch": func() error { return a.Fill(context.Background(), nil) },
	} {
		if err := badinput.NoPanic(t, name, f); !errors.Is(err, ErrConfig) {
			t.Errorf("Fill with %s: %v, want ErrConfig", name, err)
		}
	}
	if s := a.Stats(); s.Steps != 0 {
		t.Fatalf("refused Fills stepped the environment %d times", s.Steps)
	}
}

// mustEpsilon returns Epsilon(...) and fails the test on error.
func mustEpsilon(t testing.TB, base, alpha float64, i, n int) float64 {
	t.Helper()
	e, err := Epsilon(base, alpha, i, n)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// mustSigma returns Sigma(...) and fails the test on error.
func mustSigma(t testing.TB, first, last float64, i, n int) float64 {
	t.Helper()
	s, err := Sigma(first, last, i, n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTruncatedNormalNeverHangs: a tiny, zero, negative or NaN bound
// returns at once, inside the interval.
func TestTruncatedNormalNeverHangs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range []float64{1e-300, 1e-12, 0.01, 0.3, 0.49} {
		var sum float64
		const n = 20000
		for range n {
			z := TruncatedNormal(rng, k)
			if !(z >= -k && z <= k) {
				t.Fatalf("k = %v: drew %v", k, z)
			}
			sum += z
		}
		if m := sum / n; math.Abs(m) > 0.05*k {
			t.Errorf("k = %v: mean %v, want about 0", k, m)
		}
	}
	for _, k := range []float64{0, -1, math.NaN(), math.Inf(-1)} {
		if z := TruncatedNormal(rng, k); z != 0 {
			t.Errorf("k = %v: %v, want 0", k, z)
		}
	}
}

// TestOverlappingFillIsRefused: a Fill or Update called while a Fill of
// the same actor is running returns ErrBusy instead of racing on the
// environment and the adder; the actor works normally afterwards.
func TestOverlappingFillIsRefused(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	rec := &recorder{Env: mustEnv(t, "CartPole-v1")}
	rec.onStep = func(n int) {
		if n == 1 {
			entered <- struct{}{}
			<-release
		}
	}
	net, st := linear(t, 4, 2, make([]float64, model.DenseParams(4, 2)))
	a, err := New(Config{LocalBatch: 4}, rec, net, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- a.Fill(context.Background(), &buffer.Transitions{}) }()
	<-entered
	if err := a.Fill(context.Background(), &buffer.Transitions{}); !errors.Is(err, ErrBusy) {
		t.Errorf("overlapping Fill: %v, want ErrBusy", err)
	}
	if _, err := a.Update(); !errors.Is(err, ErrBusy) {
		t.Errorf("Update during Fill: %v, want ErrBusy", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the first Fill: %v", err)
	}
	var tr buffer.Transitions
	if err := a.Fill(context.Background(), &tr); err != nil || tr.Len() != 4 {
		t.Fatalf("a Fill after the overlap: %d transitions, %v", tr.Len(), err)
	}
	if _, err := a.Update(); err != nil {
		t.Fatalf("Update after the overlap: %v", err)
	}
}
