package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/apexrl/apex/experiment/lappal"
)

// TestExperimentLAPPALFailures: the pendulum part prints and saves issue
// 14's failure table (runs ending below −250, per method and pooled, with
// Fisher's test against uniform). Runs of 2 learner steps fail the
// acceptance checks (exit 1) but still report everything.
func TestExperimentLAPPALFailures(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run([]string{"experiment", "lap-pal", "-parts", "pendulum", "-seeds", "2", "-pendulum-steps", "2", "-out", dir}, &out, &errb)
	if code != 0 && code != 1 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"Fisher exact test", "lap+pal", "uniform+per", "IQR"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "lap-pal.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Rows []lappal.FailureRow `json:"pendulum_failures"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 6 {
		t.Fatalf("%d failure rows, want 4 methods and 2 pools: %+v", len(rep.Rows), rep.Rows)
	}
	for _, r := range rep.Rows[:4] {
		// 2 steps train nothing: every run ends far below −250.
		if len(r.Finals) != 2 || r.Failures != 2 || r.Against != "uniform" || r.FisherP != 1 {
			t.Errorf("row %+v: want 2 of 2 failed, p = 1 against uniform", r)
		}
	}
}

// TestExperimentFloat32: -float32 reaches the runs of the parts that train
// through the runtime (each recorded run's configuration says float32) and
// the report says which parts it applied to; a command whose parts have
// learners of their own does not offer it.
func TestExperimentFloat32(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run([]string{"experiment", "lap-pal", "-parts", "pendulum", "-seeds", "2", "-pendulum-steps", "2", "-float32", "-out", dir}, &out, &errb)
	if code != 0 && code != 1 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "lap-pal.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Float32  bool     `json:"float32"`
		Parts    []string `json:"float32_parts"`
		Pendulum struct {
			Config struct {
				Base struct {
					Float32 bool `json:"float32"`
				} `json:"base"`
			} `json:"config"`
		} `json:"pendulum"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Float32 || !slices.Equal(rep.Parts, []string{"pendulum", "cartpole"}) || !rep.Pendulum.Config.Base.Float32 {
		t.Fatalf("report: float32 %t, parts %v, the pendulum runs' config float32 %t; want true, [pendulum cartpole], true\n%s",
			rep.Float32, rep.Parts, rep.Pendulum.Config.Base.Float32, b)
	}
	errb.Reset()
	if code := run([]string{"experiment", "ter", "-float32", "-out", t.TempDir()}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "-float32") {
		t.Fatalf("apex experiment ter -float32: exit %d, stderr %q; want a usage error naming the flag", code, errb.String())
	}
}
