package actor

import (
	"math"
	"testing"

	"github.com/apexrl/apex/model"
)

// TestContinuousOUNoise: with OUTheta the noise is an Ornstein–Uhlenbeck
// process: strongly correlated from step to step, with increments of std
// σ·√dt, restarting at 0 with each episode. The policy outputs 0, so the
// action is the box's middle plus the noise.
func TestContinuousOUNoise(t *testing.T) {
	const seed, sigma, theta = 11, 0.5, 0.15
	net, err := model.NewNet(model.Config{In: 3, Out: 1, OutAct: model.Tanh}, nil) // all-zero parameters
	if err != nil {
		t.Fatal(err)
	}
	var st model.Store
	st.Publish(model.NewParams(1, make([]float64, net.NumParams())))
	c, err := NewContinuous(ContinuousConfig{Sigma: sigma, OUTheta: theta, NStep: 1, Seed: seed}, mustEnv(t, "Pendulum-v1"), net, &st)
	if err != nil {
		t.Fatal(err)
	}
	obs := make([]float32, 3)
	const n = 4000
	noise := make([]float64, n)
	for i := range noise {
		c.epLen = i % 200                     // Pendulum's episodes: the process restarts every 200 steps
		noise[i] = c.SelectAction(obs)[0] / 2 // in half-range units (Pendulum: ±2)
	}
	var dsum, dsq float64
	var m int
	for i := 1; i < n; i++ {
		if i%200 == 0 {
			if math.Abs(noise[i]) > 5*sigma*0.1 { // one step from 0: std σ√dt = 0.05
				t.Errorf("seed %d: step %d starts an episode with noise %v, want near 0", seed, i, noise[i])
			}
			continue
		}
		d := noise[i] - noise[i-1]
		dsum += d
		dsq += d * d
		m++
	}
	// Increments are N(−θ·x·dt, σ²·dt): their std is σ·√dt (θ·x·dt is tiny)
	// up to clipping, which σ = 0.5 in a ±1 box rarely reaches in 200 steps.
	sd := math.Sqrt(dsq/float64(m) - (dsum/float64(m))*(dsum/float64(m)))
	if want := sigma * 0.1; math.Abs(sd-want) > 0.1*want {
		t.Errorf("seed %d: increment std %v, want σ·√dt = %v within 10%%", seed, sd, want)
	}
	if _, err := NewContinuous(ContinuousConfig{OUTheta: -1}, mustEnv(t, "Pendulum-v1"), net, &st); err == nil {
		t.Error("a negative OUTheta was accepted")
	}
	if _, err := NewContinuous(ContinuousConfig{NoNoise: true, OUTheta: 0.15}, mustEnv(t, "Pendulum-v1"), net, &st); err == nil {
		t.Error("OUTheta with NoNoise was accepted")
	}
}
