package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestTrainWritesResults(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run([]string{"-actors=2", "-steps=60", "-duration=0", "-capacity=2000", "-progress=0", "-out", dir}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Config struct {
			Env             string  `json:"env"`
			Batch           int     `json:"batch"`
			LR              float64 `json:"lr"`
			NStep           int     `json:"n_step"`
			ReplayRatio     float64 `json:"replay_ratio"`
			MinSize         int     `json:"min_size_to_sample"`
			CheckpointEvery int64   `json:"checkpoint_every_ns"`
		} `json:"config"`
		StopReason string `json:"stop_reason"`
		Build      struct {
			Version   string `json:"version"`
			GoVersion string `json:"go_version"`
		} `json:"build"`
		Machine struct {
			OS         string `json:"os"`
			Arch       string `json:"arch"`
			CPUs       int    `json:"cpus"`
			GOMAXPROCS int    `json:"gomaxprocs"`
		} `json:"machine"`
		LearnerSteps int64     `json:"learner_steps"`
		FinalReturns []float64 `json:"final_returns"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.Config.Env != "CartPole-v1" || res.LearnerSteps != 60 || len(res.FinalReturns) != 20 {
		t.Fatalf("results.json: %s", raw)
	}
	// The effective configuration (dqn's defaults filled in), why the run
	// stopped, and what ran it where.
	c := res.Config
	if c.Batch != 64 || c.LR != 1e-3 || c.NStep != 3 || c.ReplayRatio != 4 || c.MinSize != 1000 || c.CheckpointEvery != int64(time.Minute) {
		t.Errorf("effective config: %+v", c)
	}
	if res.StopReason != "steps" || res.Build.GoVersion == "" || res.Build.Version == "" ||
		res.Machine.OS == "" || res.Machine.Arch == "" || res.Machine.CPUs < 1 || res.Machine.GOMAXPROCS < 1 {
		t.Errorf("stop reason, build or machine missing: %s", raw)
	}
	for _, f := range []string{"curve.png", "checkpoint.apex"} { // a checkpoint by default
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if !strings.Contains(out.String(), "msg=done stop_reason=steps final_return=") {
		t.Fatalf("output: %s", out.String())
	}
}

func TestTrainJSONLogs(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"-actors=2", "-steps=400", "-duration=0", "-capacity=2000", "-progress=1ms", "-log-format=json", "-out", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	msgs := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON record: %q (%v)", line, err)
		}
		msgs[rec["msg"].(string)]++
		if rec["msg"] == "done" && rec["learner_steps"].(float64) != 400 {
			t.Fatalf("done record: %v", rec)
		}
	}
	if msgs["done"] != 1 || msgs["progress"] == 0 {
		t.Fatalf("records: %v", msgs)
	}
	errb.Reset()
	if code := run([]string{"-log-format=xml"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "valid: text, json") {
		t.Fatalf("-log-format=xml: exit %d, %q", code, errb.String())
	}
}

func TestTrainBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-env=Nope-v0"}, "valid: "},
		{[]string{"-sampler=greedy"}, "valid: uniform, per, rank, lap, pal, ter, refer, refer-1, refer-2, er"},
		{[]string{"-actors=x"}, "invalid value"},
		{[]string{"train", "extra"}, "unexpected argument"},
		{[]string{"-inserters=-2"}, `want a count in [0, 1024] or "direct"`},
		{[]string{"-inserters=-1"}, `want a count in [0, 1024] or "direct"`},
		{[]string{"-inserters=direct", "-deterministic", "-steps=5", "-out", t.TempDir()}, "Inserters (-inserters) configures the concurrent schedule"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"train", "-h"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "-replay-ratio") {
		t.Errorf("train -h: exit %d, %q", code, out.String())
	}
}

func TestTrainCheckpointResumeDeterministic(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	ck := filepath.Join(dir, "run.ckpt")
	var out, errb bytes.Buffer
	if code := run([]string{"-actors=2", "-steps=60", "-duration=0", "-capacity=2000", "-progress=0", "-checkpoint", ck, "-out", dir}, &out, &errb); code != 0 {
		t.Fatalf("first segment: exit %d: %s", code, errb.String())
	}
	if code := run([]string{"-resume", ck, "-steps=90", "-duration=0", "-progress=0", "-stop-when-solved=false", "-epsilon=0.3", "-epsilon-decay=50", "-out", dir}, &out, &errb); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errb.String())
	}
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		LearnerSteps int64 `json:"learner_steps"`
		Config       struct {
			Resumes      int     `json:"resumes"`
			TargetReturn float64 `json:"target_return"`
			Epsilon      float64 `json:"epsilon"`
			EpsilonDecay int64   `json:"epsilon_decay_steps"`
		} `json:"config"`
	}
	// -stop-when-solved=false also clears the threshold the first segment derived.
	if err := json.Unmarshal(raw, &res); err != nil || res.LearnerSteps != 90 || res.Config.Resumes != 1 || res.Config.TargetReturn != 0 ||
		res.Config.Epsilon != 0.3 || res.Config.EpsilonDecay != 50 { // exploration settings apply on resume
		t.Fatalf("resumed results: %s (%v)", raw, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-resume", filepath.Join(dir, "missing.ckpt")}, "bad checkpoint"},
		{[]string{"-resume", ck, "-env=Acrobot-v1"}, "cannot change"},
		{[]string{"-deterministic", "-actors=2", "-steps=10", "-duration=0"}, "-deterministic needs -actors=1"},
		{[]string{"-deterministic"}, "-steps=N (N > 0)"},
		{[]string{"-resume", ck, "-replay-ratio=8"}, "cannot change on resume"},
		{[]string{"-actors=0"}, "-actors must be positive"},
		{[]string{"-steps=-5"}, "must not be negative"},
	} {
		errb.Reset()
		if code := run(append(c.args, "-out", dir), &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
	errb.Reset()
	// -deterministic implies -actors=1 -duration=0.
	if code := run([]string{"-deterministic", "-steps=40", "-capacity=2000", "-progress=0", "-out", dir}, &out, &errb); code != 0 {
		t.Fatalf("deterministic: exit %d: %s", code, errb.String())
	}
}

// TestTrainWarnsBiasedPairing: PER with MSE and no importance weights runs,
// with the Theorem 3 warning in the log.
func TestTrainWarnsBiasedPairing(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"train", "-deterministic", "-steps=30", "-sampler=per", "-loss=mse", "-no-is", "-checkpoint=none",
		"-progress=0", "-out", t.TempDir()}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "Theorem 3") {
		t.Fatalf("exit %d, stdout %q, stderr %q: want success with the Theorem 3 warning", code, stdout.String(), stderr.String())
	}
}

// TestTrainFloat32: the learner is float32 by default and records it in
// results.json; -float32=false trains the float64 learner; a resume keeps
// the checkpoint's precision unless -float32 is given, and converts (with
// a warning naming the conversion) when it is.
func TestTrainFloat32(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "run.ckpt")
	var out, errb bytes.Buffer
	float32Of := func(steps int64) bool {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			LearnerSteps int64 `json:"learner_steps"`
			Config       struct {
				Float32 *bool `json:"float32"`
			} `json:"config"`
		}
		if err := json.Unmarshal(raw, &res); err != nil || res.LearnerSteps != steps || res.Config.Float32 == nil {
			t.Fatalf("results (want %d learner steps and a float32 key): %s (%v)", steps, raw, err)
		}
		return *res.Config.Float32
	}
	train := func(args ...string) string {
		t.Helper()
		out.Reset()
		errb.Reset()
		if code := run(append(args, "-progress=0", "-out", dir), &out, &errb); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	train("train", "-deterministic", "-steps=40", "-capacity=2000", "-checkpoint", ck)
	if !float32Of(40) {
		t.Fatal("the default run's learner is not float32")
	}
	if log := train("-resume", ck, "-steps=60", "-float32=false", "-checkpoint", ck); float32Of(60) || !strings.Contains(log, "converted to float64") {
		t.Fatalf("-resume -float32=false: float32 %t, log %q; want float64 and the conversion warning", float32Of(60), log)
	}
	if log := train("-resume", ck, "-steps=80", "-checkpoint", ck); float32Of(80) || strings.Contains(log, "converted") {
		t.Fatalf("-resume of a float64 checkpoint without -float32: float32 %t, log %q; want float64, no conversion", float32Of(80), log)
	}
	if log := train("-resume", ck, "-steps=100", "-float32"); !float32Of(100) || !strings.Contains(log, "converted to float32") {
		t.Fatalf("-resume -float32: float32 %t, log %q; want float32 and the conversion warning", float32Of(100), log)
	}
	train("train", "-float32=false", "-deterministic", "-steps=40", "-capacity=2000", "-checkpoint=none")
	if float32Of(40) {
		t.Fatal("-float32=false: the learner is float32")
	}
}
