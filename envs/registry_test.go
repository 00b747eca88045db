package envs_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/envs"
)

func TestNames(t *testing.T) {
	want := []string{
		"Acrobot-v1", "BlindCliffwalk", "CartPole-v1", "KeyDoor", "KeyDoor-Random",
		"KeyDoor-Tabular", "LQR-v0", "MountainCar-v0", "MountainCarContinuous-v0", "NChain", "Pendulum-v1",
		"SparsePendulum-v1",
	}
	if got := envs.Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for _, n := range want {
		if _, err := envs.Make(n); err != nil {
			t.Errorf("Make(%q): %v", n, err)
		}
	}
}

func TestMakeUnknown(t *testing.T) {
	for _, name := range []string{"", "cartpole-v1", "CartPole-v0", "Breakout"} {
		env, err := envs.Make(name)
		if env != nil || !errors.Is(err, envs.ErrUnknownEnv) {
			t.Fatalf("Make(%q) = %v, %v; want ErrUnknownEnv", name, env, err)
		}
		for _, n := range envs.Names() {
			if !strings.Contains(err.Error(), n) {
				t.Errorf("Make(%q): error %q does not list %s", name, err, n)
			}
		}
	}
}

func TestMakeBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []envs.Option
		msg  string
	}{
		{"CartPole-v1", []envs.Option{envs.WithSize(4)}, "does not accept WithSize"},
		{"Pendulum-v1", []envs.Option{envs.WithRandomLayout()}, "does not accept WithRandomLayout"},
		{"NChain", []envs.Option{envs.WithGoalReward(1)}, "does not accept WithGoalReward"},
		{"Acrobot-v1", []envs.Option{envs.WithMaxSteps(0)}, "at least 1"},
		{"MountainCar-v0", []envs.Option{envs.WithMaxSteps(-5)}, "at least 1"},
		{"NChain", []envs.Option{envs.WithSize(1)}, "chain length"},
		{"BlindCliffwalk", []envs.Option{envs.WithSize(0)}, "number of states"},
		{"KeyDoor", []envs.Option{envs.WithSize(4)}, "grid side"},
		{"KeyDoor-Random", []envs.Option{envs.WithSize(33)}, "grid side"},
		{"KeyDoor", []envs.Option{envs.WithGoalReward(math.Inf(1))}, "finite"},
		{"KeyDoor", []envs.Option{nil}, "nil Option"},
		{"KeyDoor-Random", []envs.Option{envs.WithTabular()}, "does not combine with WithRandomLayout"},
		{"CartPole-v1", []envs.Option{envs.WithTabular()}, "does not accept WithTabular"},
	} {
		env, err := envs.Make(tc.name, tc.opts...)
		if env != nil || !errors.Is(err, envs.ErrBadOption) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Make(%s, ...) = %v, %v; want ErrBadOption mentioning %q", tc.name, env, err, tc.msg)
		}
	}
}

func TestDefaultLimits(t *testing.T) {
	for name, want := range map[string]int{
		"CartPole-v1": 500, "Acrobot-v1": 500, "MountainCar-v0": 200,
		"MountainCarContinuous-v0": 999, "Pendulum-v1": 200, "NChain": 800,
		"BlindCliffwalk": 0, "KeyDoor": 360, "KeyDoor-Random": 360, "LQR-v0": 200,
	} {
		env, _ := envs.Make(name)
		if got := env.MaxEpisodeSteps(); got != want {
			t.Errorf("%s: MaxEpisodeSteps = %d, want %d", name, got, want)
		}
	}
	env, _ := envs.Make("NChain", envs.WithSize(5))
	if env.MaxEpisodeSteps() != 50 {
		t.Errorf("NChain N=5: limit %d, want 2N² = 50", env.MaxEpisodeSteps())
	}
}
