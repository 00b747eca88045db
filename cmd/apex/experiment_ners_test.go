package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apexrl/apex/experiment/ners"
	"github.com/apexrl/apex/runtime"
)

// TestExperimentNERSTable3: a reduced table3-td3 part trains every arm,
// prints the window and whole-run tables and writes the runs to
// ners.json; a run shorter than 1000 steps has for window the steps after
// its last evaluation (every 200 steps); an unknown arm is refused with
// exit 2. The runs are smoke-sized (220 learner steps: the learner steps
// are nearly all of a run's time); the part at full size is
// `apex experiment ners -parts table3-td3`.
func TestExperimentNERSTable3(t *testing.T) {
	const steps, windowSteps = 220, 20 // the window: steps (200, 220]
	dir := filepath.Join(t.TempDir(), "ners")
	var out, errb bytes.Buffer
	code := run([]string{"experiment", "ners", "-parts", "table3-td3", "-table3-seeds", "2", "-table3-steps", strconv.Itoa(steps),
		"-table3-arms", "uniform,ners,ners-frozen", "-out", dir}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", code, errb.String(), out.String())
	}
	for _, want := range []string{fmt.Sprintf("window: rows sampled in learner steps (200, %d]", steps), "whole run", "\n  uniform ", "\n  ners-frozen ", "r_re = 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "ners.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Table3 struct {
			Runs []struct {
				Arm    string `json:"arm"`
				Window struct {
					N uint64 `json:"n"`
				} `json:"window"`
			} `json:"runs"`
		} `json:"table3-td3"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Table3.Runs) != 6 {
		t.Fatalf("ners.json holds %d table3 runs, want 6", len(rep.Table3.Runs))
	}
	for _, r := range rep.Table3.Runs {
		if r.Window.N != windowSteps*128 {
			t.Errorf("%s: window of %d rows, want %d steps of 128", r.Arm, r.Window.N, windowSteps)
		}
	}
	errb.Reset()
	if code := run([]string{"experiment", "ners", "-parts", "table3-td3", "-table3-arms", "uniform,bogus", "-out", t.TempDir()}, &out, &errb); code != 2 {
		t.Errorf("unknown arm: exit %d, want 2; stderr:\n%s", code, errb.String())
	}
}

// TestTable3ArmsBuild: every arm of both table3 parts builds its trainer
// (no arm carries a setting its learner or method refuses).
func TestTable3ArmsBuild(t *testing.T) {
	for _, algo := range []string{"td3", "sac"} {
		for _, env := range []string{"SparsePendulum-v1", "Pendulum-v1"} {
			cfg := ners.DefaultTable3Config(algo, env)
			for _, a := range cfg.Arms {
				tc := cfg.Base.ForMethod(a.Sampler)
				if a.Tweak != nil {
					a.Tweak(&tc)
				}
				tc.Seed, tc.Actors, tc.Deterministic = 1, 1, true
				if _, err := runtime.NewTrainer(tc); err != nil {
					t.Errorf("%s on %s, arm %s: %v", algo, env, a.Name, err)
				}
			}
		}
	}
}
