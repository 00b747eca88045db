package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/apexrl/apex/remote"
)

// TestLearnerFleet runs apex learner against two apex replay shards (the
// run's rate limiter on) fed by one actor host: shards serving another run
// configuration are refused by name, a bad -shard-sampling is a usage
// error; the learner samples across both shards, keeps learning when
// shard b is killed by its pid, takes b back when it restarts on its
// address (a new incarnation), and exits 0 with its results; its rate
// while b is down is at least 45% of its rate before. Every process
// is ended by its own pid and every file removed (t.TempDir).
func TestLearnerFleet(t *testing.T) {
	bin := apexBinary(t)
	dir := t.TempDir()
	run := []string{"-env=CartPole-v1", "-actors=2", "-seed=3"}
	startShard := func(name, listen string, extra ...string) (*proc, string) {
		addrFile := filepath.Join(dir, name+".addr")
		args := append([]string{"replay", "-listen=" + listen, "-addr-file=" + addrFile}, run...)
		p := startProc(t, dir, name, bin, append(args, extra...)...)
		return p, waitAddr(t, p, addrFile)
	}
	_, a := startShard("shard-a", "127.0.0.1:0")
	b, baddr := startShard("shard-b", "127.0.0.1:0")
	other, oaddr := startShard("shard-other", "127.0.0.1:0", "-seed=4")

	mismatch := startProc(t, dir, "learner-mismatch", bin, "learner", "-replay="+a+","+oaddr, "-listen=127.0.0.1:0",
		"-progress=0", "-out="+filepath.Join(dir, "mismatch"))
	if err, exited := mismatch.wait(time.Minute); !exited || err == nil ||
		!strings.Contains(mismatch.output(), a) || !strings.Contains(mismatch.output(), oaddr) || !strings.Contains(mismatch.output(), "seed differ") {
		t.Fatalf("apex learner against mismatched shards: exited %v, %v:\n%s", exited, err, mismatch.output())
	}
	other.stop(t)
	bad := startProc(t, dir, "learner-bad", bin, "learner", "-replay="+a+","+baddr, "-shard-sampling=all")
	if err, exited := bad.wait(time.Minute); !exited || exitCode(err) != 2 || !strings.Contains(bad.output(), "-shard-sampling") {
		t.Fatalf("apex learner -shard-sampling=all: exited %v, %v:\n%s", exited, err, bad.output())
	}

	learnerAddr := filepath.Join(dir, "learner.addr")
	out := filepath.Join(dir, "learner")
	learner := startProc(t, dir, "learner", bin, "learner", "-replay="+a+","+baddr, "-shard-sampling=exact", "-shard-deadline=500ms",
		"-listen=127.0.0.1:0", "-addr-file="+learnerAddr, "-duration=10m", "-stop-when-solved=false", "-progress=1s", "-out="+out)
	laddr := waitAddr(t, learner, learnerAddr)
	actor := startProc(t, dir, "actor", bin, "actor", "-replay="+a+","+baddr, "-learner="+laddr, "-progress=0",
		"-shard-ack-timeout=500ms", "-shard-probe-timeout=300ms")
	waitInserted(t, a, 500, time.Minute, "two shards", actor, learner)
	waitInserted(t, baddr, 500, time.Minute, "two shards", actor, learner)
	time.Sleep(2 * time.Second)

	killed := time.Now()
	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, exited := b.wait(10 * time.Second); !exited {
		t.Fatal("shard b did not exit on SIGKILL")
	}
	time.Sleep(3 * time.Second)
	restartedAt := time.Now()
	if _, baddr2 := startShard("shard-b2", baddr); baddr2 != baddr {
		t.Fatalf("shard b restarted on %s, not %s", baddr2, baddr)
	}
	// The learner runs until the last window below has its records (it
	// is stopped by signal, not by a fixed -duration that a slow start on
	// a loaded machine would eat into; -duration=10m only bounds it).
	time.Sleep(time.Until(restartedAt.Add(9500 * time.Millisecond)))
	if err := syscall.Kill(learner.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err, exited := learner.wait(time.Minute)
	if !exited || err != nil {
		t.Fatalf("the learner after SIGTERM: exited %v, %v:\n%s", exited, err, learner.output())
	}
	var res struct {
		LearnerSteps int64  `json:"learner_steps"`
		StopReason   string `json:"stop_reason"`
	}
	raw, rerr := os.ReadFile(filepath.Join(out, "results.json"))
	if rerr == nil {
		rerr = json.Unmarshal(raw, &res)
	}
	if rerr != nil || res.StopReason != "interrupted" || res.LearnerSteps < 100 {
		t.Fatalf("the learner's results (%v): %+v:\n%s", rerr, res, learner.output())
	}
	o := learner.output()
	i := strings.LastIndex(o, "msg=shards")
	if i < 0 {
		t.Fatalf("the learner logged no shard record:\n%s", o)
	}
	rec := o[i:]
	bRec := "" // shard b's entry (the shards are in address order)
	if j := strings.Index(rec, "\""+baddr+" "); j >= 0 {
		bRec, _, _ = strings.Cut(rec[j+1:], "\"")
	}
	// The record is written after SIGTERM ended the stage: the shutdown
	// is not counted as the shards going down.
	if !strings.Contains(bRec, " up=true ") || !strings.Contains(bRec, " downs=1 rejoins=1 ") || strings.Count(rec, " up=true ") != 2 {
		t.Errorf("the learner's shard record after SIGTERM (want both shards up, shard b down once and back):\n%s", rec)
	}
	t.Logf("%d learner steps; %s", res.LearnerSteps, strings.TrimSpace(rec))
	// The learner's rate (its progress records, one a second) before the
	// kill, while shard b was down and after its restart.
	rate := func(from, to time.Time) float64 { return stepRate(t, o, from, to) }
	before, during, after := rate(killed.Add(-3*time.Second), killed), rate(killed.Add(time.Second), restartedAt), rate(restartedAt.Add(2*time.Second), restartedAt.Add(8*time.Second))
	t.Logf("learner steps/s: %.0f before the kill, %.0f with shard b down, %.0f from 2 s after its restart", before, during, after)
	// The target: at least 45% of the rate with 1 of 2 shards
	// lost (full rate after the restart is logged: this machine's load
	// moves it too much for a tighter bound).
	if before <= 0 || during < 0.45*before || after < 0.45*before {
		t.Errorf("learner steps/s %.0f before, %.0f during the loss, %.0f after the restart: want both >= 45%% of before", before, during, after)
	}
}

// stepRate is the learner's steps per second between the progress
// records of log nearest after from and before to; fewer than two records
// in the window fail the test ("window empty") rather than read as a rate
// of 0.
func stepRate(t *testing.T, log string, from, to time.Time) float64 {
	t.Helper()
	type rec struct {
		at    time.Time
		steps float64
	}
	var recs []rec
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "msg=progress") {
			continue
		}
		var r rec
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "time":
				r.at, _ = time.Parse(time.RFC3339Nano, v)
			case "learner_steps":
				fmt.Sscan(v, &r.steps)
			}
		}
		if !r.at.Before(from) && !r.at.After(to) {
			recs = append(recs, r)
		}
	}
	if len(recs) < 2 {
		t.Fatalf("window empty: %d progress records between %s and %s (want >= 2):\n%s", len(recs), from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano), log)
	}
	a, b := recs[0], recs[len(recs)-1]
	return (b.steps - a.steps) / b.at.Sub(a.at).Seconds()
}

// exitCode is a process's exit status from its Wait error (0 for nil, -1
// when it did not exit normally).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// TestLearnerShardMetricNames: apex learner's fleet metrics are well
// named, distinct, read what they say, pass the Prometheus linter and are
// listed in the README.
func TestLearnerShardMetricNames(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range learnerShardMetrics {
		if seen[m.name] {
			t.Errorf("%s twice", m.name)
		}
		seen[m.name] = true
		if !strings.HasPrefix(m.name, "apex_learner_") {
			t.Errorf("%s: not apex_learner_...", m.name)
		}
		if (m.kind == counter) != strings.HasSuffix(m.name, "_total") {
			t.Errorf("%s: counters and only counters end in _total", m.name)
		}
		if !strings.Contains(string(readme), "`"+m.name+"`") {
			t.Errorf("README.md does not list %s", m.name)
		}
	}
	snap := remote.ShardStats{Draws: 9, Dropped: 4, GateWait: 1500 * time.Millisecond,
		Shards: []remote.ShardState{{Up: true, Downs: 1, Rejoins: 1}, {Up: false, Downs: 2}}}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(newStatsCollector(func() remote.ShardStats { return snap }, learnerShardMetrics)); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
	want := `# HELP apex_learner_replay_shards_live Replay shards in the masses now (the others are down and probed).
# TYPE apex_learner_replay_shards_live gauge
apex_learner_replay_shards_live 1
# HELP apex_learner_shard_downs_total Times a shard was left out (its stream broke or it missed the deadline).
# TYPE apex_learner_shard_downs_total counter
apex_learner_shard_downs_total 3
# HELP apex_learner_shard_gate_wait_seconds_total Time draws were held by the fleet's rate limiter or for a live shard.
# TYPE apex_learner_shard_gate_wait_seconds_total counter
apex_learner_shard_gate_wait_seconds_total 1.5
# HELP apex_learner_shard_write_backs_dropped_total Write-back values dropped for a shard that was down or had restarted since the draw (never applied).
# TYPE apex_learner_shard_write_backs_dropped_total counter
apex_learner_shard_write_backs_dropped_total 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "apex_learner_replay_shards_live", "apex_learner_shard_downs_total",
		"apex_learner_shard_gate_wait_seconds_total", "apex_learner_shard_write_backs_dropped_total"); err != nil {
		t.Error(err)
	}
}
