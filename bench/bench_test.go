package bench

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// tinyConfig is a short run that exercises every path of the harness.
func tinyConfig() Config {
	cfg := DefaultConfig()
	cfg.Actors = 4
	cfg.Capacity = 1 << 12
	cfg.Duration = 200 * time.Millisecond
	cfg.SoloDuration = 100 * time.Millisecond
	return cfg
}

func checkResult(t *testing.T, name string, r *Result, solo bool) {
	t.Helper()
	if r.InsertsPerSec <= 0 || r.SamplesPerSec <= 0 || r.UpdatesPerSec <= 0 || r.LearnerSteps == 0 {
		t.Errorf("%s: non-positive rates: %+v", name, r)
	}
	if !(0 < r.LearnerStepP50US && r.LearnerStepP50US <= r.LearnerStepP99US &&
		r.LearnerStepP99US <= r.LearnerStepP999US && r.LearnerStepP999US <= r.LearnerStepMaxUS) {
		t.Errorf("%s: latency percentiles out of order: p50 %v p99 %v p99.9 %v max %v", name,
			r.LearnerStepP50US, r.LearnerStepP99US, r.LearnerStepP999US, r.LearnerStepMaxUS)
	}
	if r.DurationSec < 0.1 {
		t.Errorf("%s: load phase lasted %vs, want >= 0.1", name, r.DurationSec)
	}
	if solo && (r.SoloSamplesPerSec <= 0 || r.LoadToSolo <= 0) {
		t.Errorf("%s: no solo figures: %+v", name, r)
	}
	if !solo && r.SoloSamplesPerSec != 0 {
		t.Errorf("%s: solo figures without -solo", name)
	}
	if r.UpdatesPerSec > r.SamplesPerSec*1.0001 {
		t.Errorf("%s: more updates (%v/s) than samples (%v/s)", name, r.UpdatesPerSec, r.SamplesPerSec)
	}
}

func TestRunShort(t *testing.T) {
	rep, err := Run(context.Background(), tinyConfig())
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, "apex", &rep.Result, true)
	if rep.Baseline == nil {
		t.Fatal("no baseline result")
	}
	checkResult(t, "baseline", rep.Baseline, true)
	if rep.Backend != "apex" || rep.Baseline.Backend != "mutex-baseline" || !rep.GenerationsTracked || rep.Baseline.GenerationsTracked {
		t.Errorf("backend identities: %q %v, %q %v", rep.Backend, rep.GenerationsTracked, rep.Baseline.Backend, rep.Baseline.GenerationsTracked)
	}
	if rep.Stripes == 0 || rep.ApexToBaseline <= 0 || rep.ApexToBaselineSolo <= 0 || rep.ApexToBaselineSamePath <= 0 || len(rep.Targets) != 7 {
		t.Errorf("stripes %d ratios %v %v %v targets %d", rep.Stripes, rep.ApexToBaseline, rep.ApexToBaselineSolo, rep.ApexToBaselineSamePath, len(rep.Targets))
	}
	// By default the baseline's actors take its mutex themselves, and a
	// second baseline run goes through apex's insert path.
	if rep.Baseline.InsertPath == rep.InsertPath || rep.BaselineSamePath == nil || rep.BaselineSamePath.InsertPath != rep.InsertPath {
		t.Errorf("insert paths: apex %q, baseline %q, same-path %+v", rep.InsertPath, rep.Baseline.InsertPath, rep.BaselineSamePath)
	}
	checkResult(t, "baseline (apex's path)", rep.BaselineSamePath, true)

	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	fields := []string{"inserts_per_sec", "samples_per_sec", "updates_per_sec", "learner_step_p50_us",
		"learner_step_p99_us", "learner_step_p999_us", "learner_step_max_us", "stale_updates_dropped",
		"solo_samples_per_sec", "load_to_solo"}
	for _, f := range append(fields, "apex_to_baseline", "apex_to_baseline_solo", "gomaxprocs", "go_version", "num_cpu", "targets", "config", "machine_noise") {
		if _, ok := m[f]; !ok {
			t.Errorf("JSON lacks %q", f)
		}
	}
	base, _ := m["baseline"].(map[string]any)
	for _, f := range fields {
		if _, ok := base[f]; !ok {
			t.Errorf("JSON baseline lacks %q", f)
		}
	}

	var sb strings.Builder
	if err := rep.WriteText(&sb); err != nil {
		t.Fatal(err)
	}
	// The noise probe ran for min(Duration, 2 s) on a loop as long as the
	// solo median step.
	if n := rep.Noise; n == nil || n.LoopUS != rep.SoloLearnerStepP50US || n.Samples == 0 ||
		!(0 < n.P50US && n.P50US <= n.P99US && n.P99US <= n.P999US && n.P999US <= n.MaxUS) {
		t.Errorf("machine noise %+v (solo p50 %v)", rep.Noise, rep.SoloLearnerStepP50US)
	}
	for _, s := range []string{"inserts/s", "sampled transitions/s", "step p99.9 µs", "mutex baseline", "under load / solo", "apex / baseline", "machine noise"} {
		if !strings.Contains(sb.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, sb.String())
		}
	}
}

func TestRunInsertPaths(t *testing.T) {
	for _, ins := range []int{0, 2} {
		cfg := tinyConfig()
		cfg.Inserters = ins
		cfg.Baseline, cfg.Solo = ins == 0, false
		cfg.Duration = 100 * time.Millisecond
		// Wider strata than 2^12 slots give: with several goroutines
		// inserting at once (slowed by -race), every draw of a tiny buffer
		// can meet slots being written.
		cfg.Capacity = 1 << 14
		rep, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatalf("inserters=%d: %v", ins, err)
		}
		checkResult(t, rep.InsertPath, &rep.Result, false)
		if (rep.Baseline != nil) != cfg.Baseline {
			t.Errorf("inserters=%d: baseline %v, want %v", ins, rep.Baseline != nil, cfg.Baseline)
		}
		if rep.Baseline != nil {
			checkResult(t, "baseline "+rep.InsertPath, rep.Baseline, false)
		}
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cfg := tinyConfig()
	cfg.Duration = time.Hour
	time.AfterFunc(150*time.Millisecond, cancel)
	start := time.Now()
	_, err := Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancelled run took %v", d)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, tc := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Actors = 0 }, "actors must be >= 1, got 0"},
		{func(c *Config) { c.Batch = -1 }, "batch must be >= 1, got -1"},
		{func(c *Config) { c.Capacity = 0 }, "capacity must be in"},
		{func(c *Config) { c.Capacity = MaxCapacity + 1 }, "got 67108865"},
		{func(c *Config) { c.Capacity, c.Batch = 16, 17 }, "batch must not exceed capacity (16), got 17"},
		{func(c *Config) { c.LearnerBatch = 0 }, "learner-batch must be in [1, capacity=1048576], got 0"},
		{func(c *Config) { c.Stripes = 3 }, "stripes must be 0 or a power of two"},
		{func(c *Config) { c.Inserters = -1 }, "inserters must be >= 0, got -1"},
		{func(c *Config) { c.Queue = 0 }, "queue must be >= 1, got 0"},
		{func(c *Config) { c.Duration = 0 }, "duration must be positive, got 0s"},
		{func(c *Config) { c.SoloDuration = -time.Second }, "solo-duration must not be negative, got -1s"},
	} {
		cfg := DefaultConfig()
		tc.mut(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", cfg, err, tc.want)
		}
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("Run accepted %+v", cfg)
		}
	}
}

// TestNoiseSkipped: a negative NoiseDuration skips the probe.
func TestNoiseSkipped(t *testing.T) {
	cfg := tinyConfig()
	cfg.Baseline, cfg.NoiseDuration = false, -1
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Noise != nil {
		t.Errorf("noise probe ran: %+v", rep.Noise)
	}
}

// TestRunInterruptedKeepsFigures: cancelling a run during the baseline's
// load returns the context's error with the figures measured so far: apex's
// whole, the baseline's solo phase, and its load over the time it ran.
// Progress announces every phase before it runs.
func TestRunInterruptedKeepsFigures(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := tinyConfig()
	var lines []string
	cfg.Progress = func(line string) {
		lines = append(lines, line)
		if strings.HasPrefix(line, "mutex baseline: the learner under the load") {
			cancel()
		}
	}
	rep, err := Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) || rep == nil || !rep.Interrupted {
		t.Fatalf("Run: %v, report %v", err, rep)
	}
	checkResult(t, "apex", &rep.Result, true)
	if rep.Baseline == nil || rep.Baseline.SoloSamplesPerSec <= 0 || rep.BaselineSamePath != nil || rep.Targets != nil {
		t.Errorf("interrupted report: baseline %+v, same path %v, targets %v", rep.Baseline, rep.BaselineSamePath, rep.Targets)
	}
	want := []string{"apex: filling 4096 slots", "apex: the learner alone for 100ms", "apex: the learner under the load of 4 actors for 200ms",
		"machine noise: a CPU-only loop of", "mutex baseline: filling 4096 slots", "mutex baseline: the learner alone for 100ms",
		"mutex baseline: the learner under the load of 4 actors for 200ms"}
	if len(lines) != len(want) {
		t.Fatalf("progress lines %q, want %d", lines, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("progress line %d: %q, want %q", i, lines[i], w)
		}
	}
	if d := cfg.Estimate(); d != 100*time.Millisecond*2+200*time.Millisecond*3+200*time.Millisecond {
		t.Errorf("Estimate %v", d) // solo and load of apex and the baseline, load of the same path, noise min(duration, 2s)
	}
}
