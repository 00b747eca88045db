package envs_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apexrl/apex/envs"
)

// The golden files are written by testdata/gen_golden.py, an independent
// numpy transcription of every environment's equations (and of the PCG
// draws Reset makes). Regenerate with
//
//	/usr/bin/python3 envs/testdata/gen_golden.py

// goldenTol is the tolerance, relative to max(1, |want|).
const goldenTol = 1e-9

type goldenFile struct {
	Env     string `json:"env"`
	Options struct {
		Size int `json:"size"`
	} `json:"options"`
	Cases []goldenCase `json:"cases"`
}

type goldenCase struct {
	Seed uint64 `json:"seed"`
	// Resync: after each step, set the environment's state to the recorded
	// observation (which is the state), so that each one-step transition
	// is compared on its own (for trajectories that amplify rounding).
	Resync  bool         `json:"resync"`
	Reset   []float64    `json:"reset"`
	Actions []float64    `json:"actions"`
	Steps   []goldenStep `json:"steps"`
}

type goldenStep struct {
	Obs        []float64 `json:"obs"`
	Reward     float64   `json:"reward"`
	Terminated bool      `json:"terminated"`
	Truncated  bool      `json:"truncated"`
}

func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files (%v)", err)
	}
	covered := map[string]bool{}
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var g goldenFile
		if err := json.Unmarshal(raw, &g); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		covered[g.Env] = true
		t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
			var opts []envs.Option
			if g.Options.Size != 0 {
				opts = append(opts, envs.WithSize(g.Options.Size))
			}
			var worst float64
			for _, c := range g.Cases {
				env, err := envs.Make(g.Env, opts...)
				if err != nil {
					t.Fatal(err)
				}
				worst = max(worst, replayGolden(t, env, c))
			}
			t.Logf("%d cases, largest relative deviation %.3g", len(g.Cases), worst)
		})
	}
	for _, name := range envs.Names() {
		if !covered[name] {
			t.Errorf("no golden trajectory for %s", name)
		}
	}
}

// replayGolden plays c's actions on env and compares every observation,
// reward and flag. It returns the largest relative deviation seen.
func replayGolden(t *testing.T, env envs.Env, c goldenCase) float64 {
	t.Helper()
	var worst float64
	cmp := func(what string, got, want []float64) bool {
		if len(got) != len(want) {
			t.Errorf("seed %d: %s: got %d values, want %d", c.Seed, what, len(got), len(want))
			return false
		}
		for i := range got {
			d := math.Abs(got[i]-want[i]) / max(1, math.Abs(want[i]))
			worst = max(worst, d)
			if !(d <= goldenTol) {
				t.Errorf("seed %d: %s[%d] = %.17g, want %.17g", c.Seed, what, i, got[i], want[i])
				return false
			}
		}
		return true
	}
	if !cmp("reset obs", env.Reset(c.Seed), c.Reset) {
		return worst
	}
	if !env.ObservationSpace().Contains(c.Reset) {
		t.Errorf("seed %d: reset obs %v outside %v", c.Seed, c.Reset, env.ObservationSpace())
	}
	_, discrete := env.ActionSpace().(envs.Discrete)
	for k, a := range c.Actions {
		act := envs.Action{Vec: []float64{a}}
		if discrete {
			act = envs.Action{Index: int(a)}
		}
		res, err := env.Step(act)
		if err != nil {
			t.Fatalf("seed %d step %d: %v", c.Seed, k+1, err)
		}
		want := c.Steps[k]
		what := "step " + strconv.Itoa(k+1)
		if !cmp(what+" obs", res.Obs, want.Obs) || !cmp(what+" reward", []float64{res.Reward}, []float64{want.Reward}) {
			return worst
		}
		if res.Terminated != want.Terminated || res.Truncated != want.Truncated {
			t.Errorf("seed %d %s: terminated, truncated = %v, %v; want %v, %v", c.Seed, what, res.Terminated, res.Truncated, want.Terminated, want.Truncated)
			return worst
		}
		if !env.ObservationSpace().Contains(res.Obs) {
			t.Errorf("seed %d %s: obs %v outside %v", c.Seed, what, res.Obs, env.ObservationSpace())
		}
		if c.Resync {
			envs.SetState(env, want.Obs)
		}
	}
	if last := c.Steps[len(c.Steps)-1]; last.Terminated || last.Truncated {
		if _, err := env.Step(envs.Action{}); !errors.Is(err, envs.ErrNeedsReset) {
			t.Errorf("seed %d: Step after the end: err = %v, want ErrNeedsReset", c.Seed, err)
		}
	}
	return worst
}
