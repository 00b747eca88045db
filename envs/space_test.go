package envs_test

import (
	"math"
	"testing"

	"github.com/apexrl/apex/envs"
)

func TestDiscreteContains(t *testing.T) {
	d := envs.Discrete{N: 3}
	for i, want := range map[int]bool{-1: false, 0: true, 2: true, 3: false} {
		if d.Contains(i) != want {
			t.Errorf("Discrete(3).Contains(%d) = %v", i, !want)
		}
	}
	if d.ContainsAction(envs.Action{Index: 1, Vec: []float64{1}}) {
		t.Error("Discrete accepts an action with a vector")
	}
	if !d.ContainsAction(envs.Action{Index: 1}) {
		t.Error("Discrete rejects index 1")
	}
	if d.String() != "Discrete(3)" {
		t.Errorf("String() = %q", d)
	}
}

func TestBoxContains(t *testing.T) {
	inf := math.Inf(1)
	b := envs.Box{Low: []float64{-1, -inf}, High: []float64{1, inf}}
	for _, tc := range []struct {
		x    []float64
		want bool
	}{
		{[]float64{0, 0}, true},
		{[]float64{-1, 1e300}, true},
		{[]float64{1, -inf}, true},
		{[]float64{1.0000001, 0}, false},
		{[]float64{math.NaN(), 0}, false},
		{[]float64{0, math.NaN()}, false},
		{[]float64{0}, false},
		{[]float64{0, 0, 0}, false},
		{nil, false},
	} {
		if got := b.Contains(tc.x); got != tc.want {
			t.Errorf("Contains(%v) = %v, want %v", tc.x, got, tc.want)
		}
		if got := b.ContainsAction(envs.Action{Vec: tc.x}); got != tc.want {
			t.Errorf("ContainsAction(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
	for _, tc := range []struct {
		b    envs.Box
		want string
	}{
		{b, "Box[-1..1, -inf..inf]"},
		{envs.Box{Low: []float64{-2}, High: []float64{2}}, "Box[-2, 2]"},
		{envs.Box{Low: []float64{0, 0, 0}, High: []float64{1, 1, 1}}, "Box[0, 1]^3"},
	} {
		if got := tc.b.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

// TestSpaces pins each environment's spaces.
func TestSpaces(t *testing.T) {
	for _, tc := range []struct {
		name   string
		obsDim int
		action string
	}{
		{"CartPole-v1", 4, "Discrete(2)"},
		{"Acrobot-v1", 6, "Discrete(3)"},
		{"MountainCar-v0", 2, "Discrete(3)"},
		{"MountainCarContinuous-v0", 2, "Box[-1, 1]"},
		{"Pendulum-v1", 3, "Box[-2, 2]"},
		{"NChain", 20, "Discrete(2)"},
		{"BlindCliffwalk", 11, "Discrete(2)"},
		{"KeyDoor", 2*6 + 8, "Discrete(5)"},
		{"KeyDoor-Random", 6*6 + 8, "Discrete(5)"},
	} {
		env, _ := envs.Make(tc.name)
		if d := env.ObservationSpace().Dim(); d != tc.obsDim {
			t.Errorf("%s: observation dim %d, want %d", tc.name, d, tc.obsDim)
		}
		if a := env.ActionSpace().String(); a != tc.action {
			t.Errorf("%s: action space %s, want %s", tc.name, a, tc.action)
		}
	}
	env, _ := envs.Make("Acrobot-v1")
	high := env.ObservationSpace().High
	if high[4] != float64(float32(4*math.Pi)) || high[5] != float64(float32(9*math.Pi)) {
		t.Errorf("Acrobot velocity bounds %v, want float32(4π), float32(9π)", high[4:])
	}
}
