package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/runtime"
)

// TestActorMetricNames: apex actor's metrics are well named, distinct,
// read the field they say, pass the Prometheus linter and are listed in
// the README.
func TestActorMetricNames(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range actorMetrics {
		if seen[m.name] {
			t.Errorf("%s twice", m.name)
		}
		seen[m.name] = true
		if !strings.HasPrefix(m.name, "apex_actor_") {
			t.Errorf("%s: not apex_actor_...", m.name)
		}
		if (m.kind == counter) != strings.HasSuffix(m.name, "_total") {
			t.Errorf("%s: counters and only counters end in _total", m.name)
		}
		if !strings.Contains(string(readme), "`"+m.name+"`") {
			t.Errorf("README.md does not list %s", m.name)
		}
	}
	snap := actorSnapshot{
		Host:      runtime.ActorHostStats{EnvSteps: 11, Episodes: 2, Pipeline: runtime.PipelineStats{Batches: 3, Items: 96}},
		Writer:    remote.WriterStats{Acked: 5, AckedItems: 160, Lost: 1, LostItems: 32, Pending: 4, Incarnation: 77, Incarnations: 2},
		Params:    remote.SubscriberStats{Version: 42, Versions: 6},
		ParamsAge: 1500 * time.Millisecond,
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(newStatsCollector(func() actorSnapshot { return snap }, actorMetrics)); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != len(actorMetrics) {
		t.Errorf("%d metrics (%v), want %d", n, err, len(actorMetrics))
	}
	want := `# HELP apex_actor_params_version The newest parameter version the actors act with (the learner's update count; 0 before the first).
# TYPE apex_actor_params_version gauge
apex_actor_params_version 42
# HELP apex_actor_params_age_seconds Time since the newest parameter version arrived from the learner (0 before the first): how stale the actors' policy is.
# TYPE apex_actor_params_age_seconds gauge
apex_actor_params_age_seconds 1.5
# HELP apex_actor_writer_acked_items_total Transitions the replay server acknowledged.
# TYPE apex_actor_writer_acked_items_total counter
apex_actor_writer_acked_items_total 160
# HELP apex_actor_writer_lost_items_total Transitions abandoned unacknowledged.
# TYPE apex_actor_writer_lost_items_total counter
apex_actor_writer_lost_items_total 32
# HELP apex_actor_writer_in_flight_batches Insert batches sent or queued and not yet acknowledged.
# TYPE apex_actor_writer_in_flight_batches gauge
apex_actor_writer_in_flight_batches 4
# HELP apex_actor_env_steps_total Environment steps taken by this host's actors.
# TYPE apex_actor_env_steps_total counter
apex_actor_env_steps_total 11
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "apex_actor_params_version", "apex_actor_params_age_seconds",
		"apex_actor_writer_acked_items_total", "apex_actor_writer_lost_items_total", "apex_actor_writer_in_flight_batches",
		"apex_actor_env_steps_total"); err != nil {
		t.Error(err)
	}
}

// TestActorMetricsServed: an apex actor host started with -metrics-addr
// against a running apex replay and apex learner serves /metrics whose
// counters move with its work: environment steps, acknowledged inserts,
// the parameter version received and its age; the host stops on SIGTERM
// (exit 0) and takes its metrics server with it. Every process is ended
// by its pid, every file is under t.TempDir.
func TestActorMetricsServed(t *testing.T) {
	bin := apexBinary(t)
	dir := t.TempDir()
	replayAddr := filepath.Join(dir, "replay.addr")
	replay := startProc(t, dir, "replay", bin, "replay", "-listen=127.0.0.1:0", "-addr-file="+replayAddr,
		"-env=CartPole-v1", "-actors=2", "-seed=5")
	raddr := waitAddr(t, replay, replayAddr)
	learnerAddr := filepath.Join(dir, "learner.addr")
	learner := startProc(t, dir, "learner", bin, "learner", "-replay="+raddr, "-listen=127.0.0.1:0", "-addr-file="+learnerAddr,
		"-duration=2m", "-stop-when-solved=false", "-progress=0", "-checkpoint=none", "-out="+filepath.Join(dir, "learner"),
		"-log-format=json", "-metrics-addr=127.0.0.1:0")
	laddr := waitAddr(t, learner, learnerAddr)
	actor := startProc(t, dir, "actor", bin, "actor", "-replay="+raddr, "-learner="+laddr, "-progress=0",
		"-log-format=json", "-metrics-addr=127.0.0.1:0")

	url := metricsURL(t, actor)
	c := &http.Client{Timeout: 10 * time.Second}
	var m map[string]float64
	for deadline := time.Now().Add(60 * time.Second); ; {
		m = samples(t, scrape(t, c, url))
		if m["apex_actor_writer_acked_items_total"] >= 200 && m["apex_actor_params_versions_total"] >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: acked items %v, parameter versions %v:\n%s\nlearner:\n%s", m["apex_actor_writer_acked_items_total"],
				m["apex_actor_params_versions_total"], actor.output(), learner.output())
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, name := range []string{"apex_actor_env_steps_total", "apex_actor_items_total", "apex_actor_writer_acked_batches_total",
		"apex_actor_params_chunks_total", "apex_actor_writer_replay_incarnation", "process_cpu_seconds_total"} {
		if m[name] <= 0 {
			t.Errorf("%s = %v, want > 0", name, m[name])
		}
	}
	if m["apex_actor_writer_lost_items_total"] != 0 || m["apex_actor_writer_replay_incarnations_total"] != 0 {
		t.Errorf("lost %v, incarnation changes seen %v: want 0 and 0", m["apex_actor_writer_lost_items_total"], m["apex_actor_writer_replay_incarnations_total"])
	}
	if age := m["apex_actor_params_age_seconds"]; age < 0 || age > 30 {
		t.Errorf("parameter age %v s: want in [0, 30] while the learner publishes", age)
	}
	if m["apex_actor_env_steps_total"] < m["apex_actor_writer_acked_items_total"]/2 {
		t.Errorf("env steps %v against %v acknowledged transitions", m["apex_actor_env_steps_total"], m["apex_actor_writer_acked_items_total"])
	}
	// The learner serves its replay client's counters beside its own.
	lm := samples(t, scrape(t, c, metricsURL(t, learner)))
	for _, name := range []string{"apex_learner_steps_total", "apex_learner_remote_draws_total", "apex_learner_remote_rows_total",
		"apex_learner_remote_write_backs_total", "apex_learner_remote_write_backs_applied_total", "apex_learner_remote_stream_opens_total"} {
		if lm[name] <= 0 {
			t.Errorf("learner: %s = %v, want > 0", name, lm[name])
		}
	}
	if _, ok := lm["apex_learner_remote_write_backs_lost_total"]; !ok {
		t.Error("learner: no apex_learner_remote_write_backs_lost_total")
	}
	actor.stop(t)
	if err, _ := actor.wait(0); err != nil {
		t.Errorf("actor exited with %v:\n%s", err, actor.output())
	}
	if _, err := c.Get(url); err == nil {
		t.Errorf("%s still answers after the actor exited", url)
	}
}

// metricsURL waits up to 60 s for p's metrics record (JSON logs) and
// returns the URL it names (port 0 resolved); it fails if p exits first.
func metricsURL(t *testing.T, p *proc) string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		sc := bufio.NewScanner(strings.NewReader(p.output()))
		for sc.Scan() {
			var rec struct {
				Msg string `json:"msg"`
				URL string `json:"metrics_url"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "metrics" {
				return rec.URL
			}
		}
		if err, exited := p.wait(50 * time.Millisecond); exited {
			t.Fatalf("exited (%v):\n%s", err, p.output())
		}
	}
	t.Fatalf("no metrics record within 60 s:\n%s", p.output())
	return ""
}
