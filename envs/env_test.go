package envs_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apexrl/apex/envs"
)

// randomAction draws an action in the space: a uniform index, or a vector
// uniform in the box.
func randomAction(rng *rand.Rand, sp envs.Space) envs.Action {
	switch s := sp.(type) {
	case envs.Discrete:
		return envs.Action{Index: rng.IntN(s.N)}
	case envs.Box:
		v := make([]float64, s.Dim())
		for i := range v {
			v[i] = s.Low[i] + (s.High[i]-s.Low[i])*rng.Float64()
		}
		return envs.Action{Vec: v}
	}
	panic("unknown space")
}

type record struct {
	obs                   []float64
	reward                float64
	terminated, truncated bool
}

// rollout resets env with seed and plays random actions (from actSeed)
// until the episode ends or maxSteps steps; it returns the reset
// observation and the steps.
func rollout(t *testing.T, env envs.Env, seed, actSeed uint64, maxSteps int) ([]float64, []record) {
	t.Helper()
	rng := rand.New(rand.NewPCG(actSeed, 1))
	first := env.Reset(seed)
	var recs []record
	for range maxSteps {
		res, err := env.Step(randomAction(rng, env.ActionSpace()))
		if err != nil {
			t.Fatalf("step %d: %v", len(recs)+1, err)
		}
		recs = append(recs, record{res.Obs, res.Reward, res.Terminated, res.Truncated})
		if res.Done() {
			break
		}
	}
	return first, recs
}

func TestConformance(t *testing.T) {
	for _, name := range envs.Names() {
		t.Run(name, func(t *testing.T) {
			env, err := envs.Make(name)
			if err != nil {
				t.Fatal(err)
			}
			obsSpace := env.ObservationSpace()
			if len(obsSpace.Low) != len(obsSpace.High) || obsSpace.Dim() == 0 {
				t.Fatalf("observation space %v", obsSpace)
			}

			// Step before the first Reset.
			if _, err := env.Step(envs.Action{}); !errors.Is(err, envs.ErrNeedsReset) {
				t.Errorf("Step before Reset: err = %v, want ErrNeedsReset", err)
			}

			// Episodes: observations in the space, flags never both set,
			// truncation exactly at the limit, Step after the end an error.
			limit := env.MaxEpisodeSteps()
			for seed := range uint64(5) {
				first, recs := rollout(t, env, seed, seed+100, max(limit, 1000)+1)
				if !obsSpace.Contains(first) {
					t.Errorf("seed %d: reset obs %v outside %v", seed, first, obsSpace)
				}
				for k, r := range recs {
					if !obsSpace.Contains(r.obs) {
						t.Errorf("seed %d step %d: obs %v outside %v", seed, k+1, r.obs, obsSpace)
					}
					if r.terminated && r.truncated {
						t.Errorf("seed %d step %d: terminated and truncated both set", seed, k+1)
					}
					if r.truncated && k+1 != limit {
						t.Errorf("seed %d: truncated at step %d, limit %d", seed, k+1, limit)
					}
					if math.IsNaN(r.reward) || math.IsInf(r.reward, 0) {
						t.Errorf("seed %d step %d: reward %v", seed, k+1, r.reward)
					}
				}
				last := recs[len(recs)-1]
				if !last.terminated && !last.truncated {
					t.Fatalf("seed %d: episode did not end within %d steps (limit %d)", seed, len(recs), limit)
				}
				if _, err := env.Step(randomAction(rand.New(rand.NewPCG(1, 1)), env.ActionSpace())); !errors.Is(err, envs.ErrNeedsReset) {
					t.Errorf("seed %d: Step after the end: err = %v, want ErrNeedsReset", seed, err)
				}
			}

			// Determinism: the same seed and actions give identical
			// trajectories, in a fresh instance too.
			other, _ := envs.Make(name)
			f1, r1 := rollout(t, env, 42, 7, 300)
			f2, r2 := rollout(t, other, 42, 7, 300)
			if !slices.Equal(f1, f2) || !equalRecords(r1, r2) {
				t.Errorf("same seed, same actions: trajectories differ")
			}
			// Reset in the middle of an episode starts afresh.
			env.Reset(3)
			if _, err := env.Step(randomAction(rand.New(rand.NewPCG(2, 2)), env.ActionSpace())); err != nil {
				t.Fatal(err)
			}
			f3, r3 := rollout(t, env, 42, 7, 300)
			if !slices.Equal(f1, f3) || !equalRecords(r1, r3) {
				t.Errorf("Reset mid-episode: trajectory differs from a fresh one")
			}
		})
	}
}

func equalRecords(a, b []record) bool {
	return slices.EqualFunc(a, b, func(x, y record) bool {
		return slices.Equal(x.obs, y.obs) && x.reward == y.reward && x.terminated == y.terminated && x.truncated == y.truncated
	})
}

// TestSeedsDiffer checks that the environments with a random start use the
// seed.
func TestSeedsDiffer(t *testing.T) {
	for _, name := range []string{"CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1", "KeyDoor-Random"} {
		env, _ := envs.Make(name)
		a := env.Reset(1)
		b := env.Reset(2)
		c := env.Reset(1)
		if slices.Equal(a, b) {
			t.Errorf("%s: seeds 1 and 2 give the same start %v", name, a)
		}
		if !slices.Equal(a, c) {
			t.Errorf("%s: seed 1 twice gives %v and %v", name, a, c)
		}
	}
}

func TestInvalidActions(t *testing.T) {
	for _, name := range envs.Names() {
		t.Run(name, func(t *testing.T) {
			env, _ := envs.Make(name)
			ref, _ := envs.Make(name)
			var bad []envs.Action
			var good envs.Action
			switch s := env.ActionSpace().(type) {
			case envs.Discrete:
				bad = []envs.Action{{Index: -1}, {Index: s.N}, {Index: 1 << 40}, {Vec: []float64{0}}, {Vec: []float64{}}}
				good = envs.Action{Index: s.N - 1}
			case envs.Box:
				nan, inf := math.NaN(), math.Inf(1)
				bad = []envs.Action{{}, {Vec: []float64{}}, {Vec: make([]float64, s.Dim()+1)}, {Vec: []float64{nan}}, {Vec: []float64{inf}}, {Vec: []float64{-inf}}}
				good = envs.Action{Vec: s.High}
			}
			env.Reset(9)
			ref.Reset(9)
			for _, a := range bad {
				if env.ActionSpace().ContainsAction(a) {
					t.Errorf("ContainsAction(%+v) = true", a)
				}
				_, err := env.Step(a)
				if !errors.Is(err, envs.ErrInvalidAction) {
					t.Errorf("Step(%+v): err = %v, want ErrInvalidAction", a, err)
				}
			}
			// A rejected action leaves the episode untouched.
			got, err := env.Step(good)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := ref.Step(good)
			if !slices.Equal(got.Obs, want.Obs) || got.Reward != want.Reward {
				t.Errorf("after rejected actions: step gives %v, want %v", got, want)
			}
			if !env.ActionSpace().ContainsAction(good) {
				t.Errorf("ContainsAction(%+v) = false", good)
			}
		})
	}
}

func TestWithMaxSteps(t *testing.T) {
	for _, name := range envs.Names() {
		env, err := envs.Make(name, envs.WithMaxSteps(3))
		if err != nil {
			t.Fatal(err)
		}
		if env.MaxEpisodeSteps() != 3 {
			t.Errorf("%s: MaxEpisodeSteps = %d, want 3", name, env.MaxEpisodeSteps())
		}
		for seed := range uint64(20) {
			_, recs := rollout(t, env, seed, seed, 10)
			last := recs[len(recs)-1]
			if len(recs) > 3 || (len(recs) < 3 && !last.terminated) || (len(recs) == 3 && last.terminated == last.truncated) {
				t.Errorf("%s seed %d: ended after %d steps with terminated=%v truncated=%v", name, seed, len(recs), last.terminated, last.truncated)
			}
		}
	}
}

// TestObservationOwnership: the caller owns returned observations and
// spaces; writing to them does not reach the environment.
func TestObservationOwnership(t *testing.T) {
	for _, name := range envs.Names() {
		env, _ := envs.Make(name)
		ref, _ := envs.Make(name)
		obs := env.Reset(5)
		ref.Reset(5)
		clear(obs)
		sp := env.ObservationSpace()
		sp.Low[0], sp.High[0] = 99, -99
		if b, ok := env.ActionSpace().(envs.Box); ok {
			b.Low[0], b.High[0] = 99, -99
		}
		a := envs.Action{}
		if b, ok := ref.ActionSpace().(envs.Box); ok {
			a.Vec = make([]float64, b.Dim())
		}
		got, err := env.Step(a)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, _ := ref.Step(a)
		if !slices.Equal(got.Obs, want.Obs) {
			t.Errorf("%s: writing to the reset observation changed the episode", name)
		}
		if s := env.ObservationSpace(); s.Low[0] == 99 {
			t.Errorf("%s: writing to ObservationSpace() changed the environment's space", name)
		}
		if b, ok := env.ActionSpace().(envs.Box); ok && b.Low[0] == 99 {
			t.Errorf("%s: writing to ActionSpace() changed the environment's space", name)
		}
	}
}

// TestGoldenUpToDate regenerates the golden files with the numpy
// transcription and checks that the committed ones are identical. It needs
// Debian's python3 with numpy (.ci/run installs python3-numpy) and fails,
// rather than skips, without it: a skipped check would pass silently.
func TestGoldenUpToDate(t *testing.T) {
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import numpy").CombinedOutput(); err != nil {
		t.Fatalf("%s with numpy is needed to check the golden files (%v: %s); apt-get install python3-numpy", py, err, out)
	}
	dir := t.TempDir()
	out, err := exec.Command(py, filepath.Join("testdata", "gen_golden.py"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("gen_golden.py: %v\n%s", err, out)
	}
	fresh, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	committed, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	if len(fresh) != len(committed) {
		t.Fatalf("generator writes %d files, %d committed", len(fresh), len(committed))
	}
	for _, f := range fresh {
		a, _ := os.ReadFile(f)
		b, err := os.ReadFile(filepath.Join("testdata", "golden", filepath.Base(f)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s is stale (%v): run /usr/bin/python3 envs/testdata/gen_golden.py", filepath.Base(f), err)
		}
	}
}
