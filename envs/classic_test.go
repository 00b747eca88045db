package envs_test

import (
	"math"
	"slices"
	"testing"

	"github.com/apexrl/apex/envs"
)

// TestCartPoleTerminatedVsTruncated: a pole that falls terminates (reward
// 1 on that step too); a balanced pole is truncated at exactly 500 steps.
func TestCartPoleTerminatedVsTruncated(t *testing.T) {
	env, _ := envs.NewCartPole()

	// Always pushing right tips the pole over within a few dozen steps.
	env.Reset(1)
	steps := 0
	for {
		res, err := env.Step(envs.Action{Index: 1})
		if err != nil {
			t.Fatal(err)
		}
		steps++
		if res.Reward != 1 {
			t.Fatalf("step %d: reward %v, want 1", steps, res.Reward)
		}
		if res.Done() {
			if !res.Terminated || res.Truncated {
				t.Fatalf("falling pole: terminated=%v truncated=%v at step %d", res.Terminated, res.Truncated, steps)
			}
			theta := res.Obs[2]
			if math.Abs(theta) <= 12*2*math.Pi/360 && math.Abs(res.Obs[0]) <= 2.4 {
				t.Fatalf("terminated inside the thresholds: %v", res.Obs)
			}
			break
		}
		if steps > 100 {
			t.Fatal("pushing right for 100 steps did not end the episode")
		}
	}

	// A linear controller keeps it up for the whole 500 steps.
	obs := env.Reset(3)
	for step := 1; ; step++ {
		a := 0
		if obs[2]+0.4*obs[3]+0.05*obs[0]+0.1*obs[1] > 0 {
			a = 1
		}
		res, err := env.Step(envs.Action{Index: a})
		if err != nil {
			t.Fatal(err)
		}
		if res.Terminated {
			t.Fatalf("controller dropped the pole at step %d", step)
		}
		if res.Truncated != (step == 500) {
			t.Fatalf("step %d: truncated = %v", step, res.Truncated)
		}
		if res.Truncated {
			break
		}
		obs = res.Obs
	}
}

// TestContinuousClipping: Pendulum clips the torque (cost on the clipped
// torque); MountainCarContinuous clips the force but charges the penalty on
// the action as given. Both as in Gymnasium.
func TestContinuousClipping(t *testing.T) {
	p1, _ := envs.NewPendulum()
	p2, _ := envs.NewPendulum()
	p1.Reset(4)
	p2.Reset(4)
	a, _ := p1.Step(envs.Action{Vec: []float64{7}})
	b, _ := p2.Step(envs.Action{Vec: []float64{2}})
	if !slices.Equal(a.Obs, b.Obs) || a.Reward != b.Reward {
		t.Errorf("Pendulum: torque 7 gives %v, torque 2 gives %v; want equal (clipped)", a, b)
	}

	m1, _ := envs.NewMountainCarContinuous()
	m2, _ := envs.NewMountainCarContinuous()
	m1.Reset(4)
	m2.Reset(4)
	c, _ := m1.Step(envs.Action{Vec: []float64{-3}})
	d, _ := m2.Step(envs.Action{Vec: []float64{-1}})
	if !slices.Equal(c.Obs, d.Obs) {
		t.Errorf("MountainCarContinuous: force -3 gives %v, -1 gives %v; want equal (clipped)", c.Obs, d.Obs)
	}
	if c.Reward != -0.1*9 || d.Reward != -0.1 {
		t.Errorf("MountainCarContinuous: rewards %v, %v; want -0.9, -0.1 (penalty on the raw action)", c.Reward, d.Reward)
	}
}

// TestMountainCarGoal: the energy-pumping policy reaches the flag and is
// terminated with reward -1 on that step; doing nothing is truncated at
// 200.
func TestMountainCarGoal(t *testing.T) {
	env, _ := envs.NewMountainCar()
	obs := env.Reset(7)
	for step := 1; ; step++ {
		a := 0
		if obs[1] >= 0 {
			a = 2
		}
		res, err := env.Step(envs.Action{Index: a})
		if err != nil {
			t.Fatal(err)
		}
		if res.Reward != -1 {
			t.Fatalf("reward %v", res.Reward)
		}
		if res.Done() {
			if !res.Terminated || res.Obs[0] < 0.5 {
				t.Fatalf("step %d: %+v", step, res)
			}
			break
		}
		obs = res.Obs
	}
	env.Reset(7)
	for step := 1; ; step++ {
		res, _ := env.Step(envs.Action{Index: 1})
		if res.Done() {
			if !res.Truncated || step != 200 {
				t.Fatalf("idle car: ended at step %d with %+v", step, res)
			}
			break
		}
	}
}

// TestAcrobotReward: -1 per step until the tip rises above the line, 0 on
// that step.
func TestAcrobotReward(t *testing.T) {
	env, _ := envs.NewAcrobot()
	obs := env.Reset(5)
	for step := 1; step <= 500; step++ {
		a := 0
		if obs[5] > 0 {
			a = 2
		}
		res, err := env.Step(envs.Action{Index: a})
		if err != nil {
			t.Fatal(err)
		}
		if res.Terminated {
			if res.Reward != 0 {
				t.Fatalf("terminal reward %v", res.Reward)
			}
			// -cos(theta1) - cos(theta1+theta2) > 1 from the observation.
			c1, s1, c2, s2 := res.Obs[0], res.Obs[1], res.Obs[2], res.Obs[3]
			if h := -c1 - (c1*c2 - s1*s2); h <= 1-1e-12 {
				t.Fatalf("terminated with tip height %v", h)
			}
			return
		}
		if res.Reward != -1 {
			t.Fatalf("step %d: reward %v", step, res.Reward)
		}
		obs = res.Obs
	}
	t.Fatal("energy pumping did not swing up within 500 steps")
}
