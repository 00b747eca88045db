package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
)

// fakeStats returns a fixed snapshot and counts the calls.
type fakeStats struct {
	st    runtime.TrainStats
	calls atomic.Int64
}

func (f *fakeStats) stats() runtime.TrainStats {
	f.calls.Add(1)
	return f.st
}

func TestTrainCollectorOneSnapshot(t *testing.T) {
	f := &fakeStats{st: runtime.TrainStats{Seconds: 12.5, EnvSteps: 1000, Episodes: 40, LearnerSteps: 30,
		BufferSize: 900,
		Learner:    runtime.LearnerStats{Steps: 30, Loss: 0.25, MeanAbsTD: 0.75, StaleWriteBacks: 3},
		Buffer: buffer.Stats{Capacity: 2048, Size: 900, Inserts: 950, Samples: 960, StaleUpdates: 4,
			TornReads: 2, TotalPriority: 123.5},
		Pipeline: runtime.PipelineStats{Batches: 19, Items: 950, LearnerSteps: 30},
		Limiter: runtime.RateLimiterStats{Inserted: 950, Sampled: 960, InsertWait: 1500 * time.Millisecond,
			SampleWait: 250 * time.Millisecond}}}
	cfg := runtime.TrainConfig{Env: "CartPole-v1", Sampler: "per", Actors: 8}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(newTrainCollector(f.stats, cfg)); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP apex_actor_env_steps_total Environment steps taken by all actors.
# TYPE apex_actor_env_steps_total counter
apex_actor_env_steps_total 1000
# HELP apex_learner_loss Weighted loss of the last learner step.
# TYPE apex_learner_loss gauge
apex_learner_loss 0.25
# HELP apex_learner_td_error_abs Mean absolute TD error of the last learner batch.
# TYPE apex_learner_td_error_abs gauge
apex_learner_td_error_abs 0.75
# HELP apex_ratelimiter_insert_wait_seconds_total Time insert calls waited for the rate limiter.
# TYPE apex_ratelimiter_insert_wait_seconds_total counter
apex_ratelimiter_insert_wait_seconds_total 1.5
# HELP apex_replay_priority_mass Sum of the stored priorities (the sum trees' total).
# TYPE apex_replay_priority_mass gauge
apex_replay_priority_mass 123.5
# HELP apex_replay_size Items stored in the replay buffer.
# TYPE apex_replay_size gauge
apex_replay_size 900
# HELP apex_train_info The training run's configuration (value 1).
# TYPE apex_train_info gauge
apex_train_info{actors="8",env="CartPole-v1",sampler="per"} 1
`
	names := []string{"apex_actor_env_steps_total", "apex_learner_loss", "apex_learner_td_error_abs",
		"apex_ratelimiter_insert_wait_seconds_total", "apex_replay_priority_mass", "apex_replay_size",
		"apex_train_info", "apex_eval_return"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err) // apex_eval_return is absent before the first evaluation
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("one scrape called Stats() %d times, want 1", n)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != len(trainMetrics)+1 {
		t.Fatalf("%d metrics (%v), want %d (the replay methods' own are absent for per)", n, err, len(trainMetrics)+1)
	}
	// A NERS run has NERS's metrics, a ReF-ER run ReF-ER's.
	for _, c := range []struct {
		sampler, want string
		names         []string
	}{
		{"ners", `
# HELP apex_ners_reward NERS: replay reward (change of evaluation return) of the last scorer update.
# TYPE apex_ners_reward gauge
apex_ners_reward -2.5
# HELP apex_ners_updates_total NERS: REINFORCE updates of the scorer.
# TYPE apex_ners_updates_total counter
apex_ners_updates_total 3
`, []string{"apex_ners_reward", "apex_ners_updates_total", "apex_refer_beta"}},
		{"refer", `
# HELP apex_refer_beta ReF-ER: the penalty coefficient beta (the policy gradient's weight; the KL's is 1 - beta).
# TYPE apex_refer_beta gauge
apex_refer_beta 0.7
`, []string{"apex_refer_beta", "apex_ners_reward"}},
	} {
		st := f.st
		st.Learner.Method, st.Learner.Beta = sampler.NERSStats{Updates: 3, Reward: -2.5, ScoreMean: 0.4}.StatsMap(), 0.7
		mreg := prometheus.NewPedanticRegistry()
		if err := mreg.Register(newTrainCollector(func() runtime.TrainStats { return st }, runtime.TrainConfig{Env: "Pendulum-v1", Sampler: c.sampler, Actors: 1})); err != nil {
			t.Fatal(err)
		}
		if err := testutil.GatherAndCompare(mreg, strings.NewReader(c.want), c.names...); err != nil {
			t.Errorf("%s: %v", c.sampler, err)
		}
	}
	f.st.Evaluated, f.st.LastEval = true, 187.5
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP apex_eval_return Mean return of the last greedy evaluation (absent until the first one).
# TYPE apex_eval_return gauge
apex_eval_return 187.5
`), "apex_eval_return"); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %+v", err, problems)
	}
}

// TestTrainMetricNames: every registered method's run has well-named,
// distinct metrics that pass the Prometheus linter.
func TestTrainMetricNames(t *testing.T) {
	for _, spec := range sampler.Specs() {
		seen := map[string]bool{}
		all := append(slices.Clone(trainMetrics), methodMetrics(spec)...)
		for _, m := range all {
			if seen[m.name] {
				t.Errorf("%s: %s twice", spec.Name, m.name)
			}
			seen[m.name] = true
			if !strings.HasPrefix(m.name, "apex_") {
				t.Errorf("%s: not apex_<subsystem>_...", m.name)
			}
			if (m.kind == counter) != strings.HasSuffix(m.name, "_total") {
				t.Errorf("%s: counters and only counters end in _total", m.name)
			}
		}
		reg := prometheus.NewPedanticRegistry()
		if err := reg.Register(newTrainCollector(func() runtime.TrainStats { return runtime.TrainStats{} }, runtime.TrainConfig{Sampler: spec.Name})); err != nil {
			t.Fatal(err)
		}
		if n, err := testutil.GatherAndCount(reg); err != nil || n != len(all)+1 {
			t.Errorf("%s: %d metrics (%v), want %d", spec.Name, n, err, len(all)+1)
		}
		if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
			t.Errorf("%s: lint: %v %+v", spec.Name, err, problems)
		}
	}
}

// TestREADMEListsEveryMetric: the README's metrics table names every
// metric the collector exports.
func TestREADMEListsEveryMetric(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"apex_train_info", "apex_eval_return"}
	for _, m := range trainMetrics {
		names = append(names, m.name)
	}
	for _, spec := range sampler.Specs() {
		for _, m := range methodMetrics(spec) {
			names = append(names, m.name)
		}
	}
	for _, n := range names {
		if !bytes.Contains(readme, []byte("`"+n)) {
			t.Errorf("README.md does not list %s", n)
		}
	}
}

// scrape GETs url and returns the body; it fails on a status other than 200.
func scrape(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body)
}

// samples parses the unlabeled samples of a text exposition.
func samples(t *testing.T, text string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.Contains(line, "{") {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("bad sample line %q", line)
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("bad sample line %q: %v", line, err)
		}
		m[name] = v
	}
	return m
}

func TestMetricsServerTrainer(t *testing.T) {
	defer goleak.VerifyNone(t)
	tr, err := runtime.NewTrainer(runtime.TrainConfig{Env: "CartPole-v1", Actors: 2, Steps: 50, Capacity: 2000,
		MinSizeToSample: 200, EvalEpisodes: 1, FinalEpisodes: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := newMetricsRegistry(tr.Stats, tr.Config())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := startMetricsServer("127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(time.Second) // on failure; idempotent
	tp := &http.Transport{}
	defer tp.CloseIdleConnections()
	c := &http.Client{Transport: tp, Timeout: 30 * time.Second}
	base := "http://" + srv.Addr()

	before := samples(t, scrape(t, c, base+"/metrics"))
	if v := before["apex_replay_capacity"]; v < 2000 {
		t.Errorf("apex_replay_capacity %v before the run, want >= 2000", v)
	}
	if v, ok := before["apex_actor_env_steps_total"]; !ok || v != 0 {
		t.Errorf("apex_actor_env_steps_total %v (present %v) before the run", v, ok)
	}
	if _, ok := before["apex_eval_return"]; ok {
		t.Error("apex_eval_return present before any evaluation")
	}

	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, c, base+"/metrics")
	after := samples(t, body)
	for name, ok := range map[string]func(float64) bool{
		"apex_actor_env_steps_total":                 func(v float64) bool { return v >= 100 },
		"apex_actor_episodes_total":                  func(v float64) bool { return v >= 1 },
		"apex_learner_steps_total":                   func(v float64) bool { return v == 50 },
		"apex_learner_loss":                          func(v float64) bool { return v > 0 },
		"apex_learner_td_error_abs":                  func(v float64) bool { return v > 0 },
		"apex_learner_stale_write_backs_total":       func(v float64) bool { return v >= 0 },
		"apex_learner_step_seconds_total":            func(v float64) bool { return v > after["apex_learner_sample_seconds_total"] },
		"apex_learner_sample_seconds_total":          func(v float64) bool { return v > 0 },
		"apex_learner_write_back_seconds_total":      func(v float64) bool { return v > 0 },
		"apex_replay_inserts_total":                  func(v float64) bool { return v >= 100 },
		"apex_replay_size":                           func(v float64) bool { return v >= 100 && v <= after["apex_replay_capacity"] },
		"apex_replay_samples_total":                  func(v float64) bool { return v >= 50 },
		"apex_replay_stale_updates_total":            func(v float64) bool { return v >= 0 },
		"apex_replay_torn_reads_total":               func(v float64) bool { return v >= 0 },
		"apex_replay_priority_mass":                  func(v float64) bool { return v > 0 },
		"apex_ratelimiter_insert_wait_seconds_total": func(v float64) bool { return v >= 0 },
		"apex_ratelimiter_sample_wait_seconds_total": func(v float64) bool { return v >= 0 },
		"apex_eval_return":                           func(v float64) bool { return v >= 1 },
		"apex_train_elapsed_seconds":                 func(v float64) bool { return v > 0 },
		"go_goroutines":                              func(v float64) bool { return v > 0 },
		"process_cpu_seconds_total":                  func(v float64) bool { return v > 0 },
	} {
		if v, present := after[name]; !present || !ok(v) {
			t.Errorf("%s = %v (present %v): implausible", name, v, present)
		}
	}
	if after["apex_replay_inserts_total"] != after["apex_pipeline_items_total"] {
		t.Errorf("inserts %v != pipeline items %v in one snapshot", after["apex_replay_inserts_total"], after["apex_pipeline_items_total"])
	}
	if !strings.Contains(body, `apex_train_info{actors="2",env="CartPole-v1",sampler="per"} 1`) {
		t.Errorf("no apex_train_info in\n%s", body)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %+v", err, problems)
	}

	if idx := scrape(t, c, base+"/debug/pprof/"); !strings.Contains(idx, "goroutine") {
		t.Errorf("/debug/pprof/ index: %.200s", idx)
	}
	if g := scrape(t, c, base+"/debug/pprof/goroutine?debug=1"); !strings.Contains(g, "goroutine profile") {
		t.Errorf("/debug/pprof/goroutine: %.200s", g)
	}
	if err := srv.Close(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(time.Second); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Get(base + "/metrics"); err == nil {
		t.Error("server still answers after Close")
	}
}

// TestMetricsServerCloseInFlight: Close bounds its wait for a long request
// (a 30 s CPU profile), closes it, and leaks no goroutine.
func TestMetricsServerCloseInFlight(t *testing.T) {
	defer goleak.VerifyNone(t)
	reg, err := newMetricsRegistry((&fakeStats{}).stats, runtime.TrainConfig{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := startMetricsServer("127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	tp := &http.Transport{}
	defer tp.CloseIdleConnections()
	c := &http.Client{Transport: tp}
	got := make(chan error, 1)
	go func() {
		resp, err := c.Get("http://" + srv.Addr() + "/debug/pprof/profile?seconds=30")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond) // let the profile start
	start := time.Now()
	err = srv.Close(200 * time.Millisecond)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
	if cerr := <-got; cerr != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the profile was cut (%v) but Close returned %v, want a deadline error", cerr, err)
	}
}

func TestTrainMetricsAddr(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run([]string{"-actors=2", "-steps=30", "-duration=0", "-capacity=2000", "-progress=0", "-out", dir,
		"-metrics-addr=127.0.0.1:0"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "msg=metrics metrics_url=http://127.0.0.1:") || !strings.Contains(out.String(), "/debug/pprof/") {
		t.Fatalf("output: %s", out.String())
	}
}

func TestTrainMetricsAddrNotLoopback(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"0.0.0.0:9090", "not a loopback address"},
		{":9090", "not a loopback address"},
		{"[::]:9090", "not a loopback address"},
		{"10.1.2.3:9090", "not a loopback address"},
		{"example.com:9090", "not a loopback address"},
		{"127.0.0.1", "invalid -metrics-addr"},
		{"127.0.0.1:http", "bad port"},
		{"127.0.0.1:70000", "bad port"},
	} {
		var out, errb bytes.Buffer
		if code := run([]string{"-metrics-addr=" + c.addr, "-steps=1"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("-metrics-addr=%s: exit %d, stderr %q; want 2 and %q", c.addr, code, errb.String(), c.want)
		}
	}
	for _, addr := range []string{"127.0.0.1:9090", "127.0.0.1:0", "127.9.9.9:1", "[::1]:9090", "localhost:9090"} {
		if err := checkMetricsAddr(addr, false); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	for _, addr := range []string{"0.0.0.0:9090", ":9090", "10.1.2.3:9090"} {
		if err := checkMetricsAddr(addr, true); err != nil {
			t.Errorf("%s with -metrics-allow-remote: %v", addr, err)
		}
	}
	var out bytes.Buffer
	if code := run([]string{"train", "-h"}, &out, io.Discard); code != 0 || !strings.Contains(out.String(), "-metrics-addr") ||
		!strings.Contains(out.String(), "-metrics-allow-remote") {
		t.Errorf("train -h: exit %d, %q", code, out.String())
	}
}
