package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// runExp runs `apex experiment args... -out dir` and returns the exit
// code, stdout and stderr.
func runExp(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append(append([]string{"experiment"}, args...), "-out", dir), &out, &errb)
	return code, out.String(), errb.String()
}

// readJSON decodes dir/name into v.
func readJSON(t *testing.T, dir, name string, v any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, raw)
	}
}

// TestExperimentCliffwalkSeed: -seed and -rank-refresh reach the sweep:
// the same seed twice gives the same updates, another seed other ones.
func TestExperimentCliffwalkSeed(t *testing.T) {
	type result struct {
		Config struct {
			Seed        uint64
			RankRefresh float64
		}
		Status string
		Rows   []struct{ Cells []struct{ Updates []int64 } }
	}
	sweep := func(seed string) result {
		dir := t.TempDir()
		code, out, errb := runExp(t, dir, "cliffwalk", "-n-min", "2", "-n-max", "3", "-seeds", "3", "-oracle-max-n", "0",
			"-seed", seed, "-rank-refresh", "0.5")
		if code != 0 {
			t.Fatalf("-seed %s: exit %d\n%s\n%s", seed, code, out, errb)
		}
		var r result
		readJSON(t, dir, "cliffwalk.json", &r)
		return r
	}
	a, b, c := sweep("7"), sweep("7"), sweep("8")
	if a.Config.Seed != 7 || c.Config.Seed != 8 || a.Config.RankRefresh != 0.5 || a.Status != "complete" {
		t.Fatalf("json config %+v, status %q", a.Config, a.Status)
	}
	if !reflect.DeepEqual(a.Rows, b.Rows) {
		t.Errorf("-seed 7 twice: %+v, then %+v", a.Rows, b.Rows)
	}
	if reflect.DeepEqual(a.Rows, c.Rows) {
		t.Errorf("-seed 7 and -seed 8 give the same updates %+v", a.Rows)
	}
}

// TestExperimentTERSeedAndSizes: ter -n runs each NChain size (one plot
// each) and -seed seeds the datasets: the same seed twice gives the same
// results, another seed other ones.
func TestExperimentTERSeedAndSizes(t *testing.T) {
	type result struct {
		Status string
		NChain []struct {
			Config struct {
				N    int    `json:"n"`
				Seed uint64 `json:"seed"`
			} `json:"config"`
			Methods []struct {
				First []int `json:"first_optimal"`
			} `json:"methods"`
			Datasets []struct {
				Successes int `json:"successes"`
			} `json:"datasets"`
		} `json:"nchain"`
	}
	nchain := func(seed string) (result, string) {
		dir := t.TempDir()
		code, out, errb := runExp(t, dir, "ter", "-parts", "nchain", "-n", "5,8", "-datasets", "4", "-seed", seed)
		if code != 0 {
			t.Fatalf("-seed %s: exit %d\n%s\n%s", seed, code, out, errb)
		}
		for _, f := range []string{"nchain-5.png", "nchain-8.png"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Error(err)
			}
		}
		var r result
		readJSON(t, dir, "ter.json", &r)
		return r, out
	}
	a, out := nchain("3")
	b, _ := nchain("3")
	c, _ := nchain("4")
	if a.Status != "complete" || len(a.NChain) != 2 || a.NChain[0].Config.N != 5 || a.NChain[1].Config.N != 8 || a.NChain[0].Config.Seed != 3 {
		t.Fatalf("ter.json %+v", a)
	}
	for _, want := range []string{"NChain N = 5 ", "NChain N = 8 ", "N = 5: the checks above were set for N = 20; shown for information, not counted"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("-seed 3 twice differs:\n%+v\n%+v", a, b)
	}
	if reflect.DeepEqual(a.NChain, c.NChain) {
		t.Errorf("-seed 3 and -seed 4 give the same results %+v", a.NChain)
	}
}

// controlSeeds is what the control parts' JSON says of their seeds.
type controlSeeds struct {
	Config struct {
		Seeds []uint64 `json:"seeds"`
	} `json:"config"`
	Runs []struct {
		Sampler string  `json:"sampler"`
		Seed    uint64  `json:"seed"`
		Final   float64 `json:"final_return"`
		// Sampled is the run's sums over its sampled rows, as written.
		Sampled json.RawMessage `json:"sampled"`
	} `json:"runs"`
}

// seedsOf lists the runs' seeds, in order of first appearance.
func (c controlSeeds) seedsOf() []uint64 {
	var s []uint64
	for _, r := range c.Runs {
		if !slices.Contains(s, r.Seed) {
			s = append(s, r.Seed)
		}
	}
	slices.Sort(s)
	return s
}

// TestExperimentControlSeeds: -seed is the first of the control parts'
// seeds (lap-pal's CartPole) and of refer's LQR runs.
func TestExperimentControlSeeds(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	code, out, errb := runExp(t, dir, "lap-pal", "-parts", "cartpole", "-seeds", "2", "-cartpole-steps", "60", "-seed", "4")
	if code != 0 && code != 1 { // at 60 steps the checks may fail
		t.Fatalf("lap-pal: exit %d\n%s\n%s", code, out, errb)
	}
	var lp struct{ Cartpole controlSeeds }
	readJSON(t, dir, "lap-pal.json", &lp)
	if want := []uint64{4, 5}; !slices.Equal(lp.Cartpole.Config.Seeds, want) || !slices.Equal(lp.Cartpole.seedsOf(), want) {
		t.Errorf("lap-pal -seed 4 -seeds 2: config seeds %v, runs' %v; want %v", lp.Cartpole.Config.Seeds, lp.Cartpole.seedsOf(), want)
	}

	// refer's Pendulum parts are too slow for a test at any size (20 final
	// episodes per run); its LQR part shows the seeds.
	dir = t.TempDir()
	code, out, errb = runExp(t, dir, "refer", "-parts", "lqr", "-lqr-seeds", "2", "-lqr-steps", "10", "-seed", "9")
	if code != 0 && code != 1 {
		t.Fatalf("refer: exit %d\n%s\n%s", code, out, errb)
	}
	var rf struct {
		LQR struct {
			Config struct {
				Seeds []uint64 `json:"seeds"`
			} `json:"config"`
			Runs []struct {
				Seed uint64 `json:"seed"`
			} `json:"runs"`
		} `json:"lqr"`
	}
	readJSON(t, dir, "refer.json", &rf)
	if !slices.Equal(rf.LQR.Config.Seeds, []uint64{9, 10}) || len(rf.LQR.Runs) != 2 || rf.LQR.Runs[0].Seed != 9 || rf.LQR.Runs[1].Seed != 10 {
		t.Errorf("refer lqr -seed 9 -lqr-seeds 2: %+v", rf.LQR)
	}
}

// TestExperimentBadFlagsRefused: the new flags' bad values are refused,
// naming the flag, before any work (the output folder is not made).
func TestExperimentBadFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cliffwalk", "-rank-refresh", "-0.5"}, "RankRefresh (-rank-refresh) must be >= 0, got -0.5"},
		{[]string{"cliffwalk", "-seeds", "-1"}, "Seeds (-seeds) must be positive, got -1"},
		{[]string{"cliffwalk", "-max-updates", "-1"}, "(-max-updates) must be positive"},
		{[]string{"cliffwalk", "-n-min", "4", "-n-max", "3"}, "(-n-min, -n-max)"},
		{[]string{"cliffwalk", "-timeout", "-1s"}, "-timeout must not be negative"},
		{[]string{"cliffwalk", "-seed", "-1"}, "-seed"},
		{[]string{"ter", "-n", "0"}, "-n"},
		{[]string{"ter", "-n", "2"}, "-n 2: ter: N must be in [3, 4096]"},
		{[]string{"ter", "-n", "10,x"}, "-n"},
		{[]string{"ter", "-n", "10,10"}, "-n lists 10 twice"},
		{[]string{"ter", "-datasets", "-1"}, "-datasets must be >= 1, got -1"},
		{[]string{"ter", "-seeds", "1"}, "-seeds must be >= 2, got 1"},
		{[]string{"ter", "-timeout", "-5m"}, "-timeout must not be negative"},
		{[]string{"ter", "-seed", "18446744073709551615"}, "-seed 18446744073709551615 with -seeds 10 passes the largest seed"},
		{[]string{"lap-pal", "-seed", "-3"}, "-seed"},
		{[]string{"lap-pal", "-seeds", "-2"}, "-seeds must be >= 2, got -2"},
		{[]string{"lap-pal", "-cartpole-steps", "0"}, "-cartpole-steps must be > 0"},
		{[]string{"lap-pal", "-seed", "18446744073709551614", "-seeds", "3"}, "passes the largest seed"},
		{[]string{"ners", "-stats-seeds", "1"}, "-stats-seeds must be >= 2, got 1"},
		{[]string{"ners", "-pendulum-steps", "-1"}, "-pendulum-steps must be >= 1, got -1"},
		{[]string{"ners", "-workers", "0"}, "-workers must be >= 1"},
		{[]string{"refer", "-lqr-seeds", "0"}, "-lqr-seeds must be >= 1, got 0"},
		{[]string{"refer", "-td3-steps", "0"}, "-td3-steps must be >= 1, got 0"},
		{[]string{"refer", "-seed", "18446744073709551615", "-seeds", "2"}, "passes the largest seed"},
	} {
		dir := filepath.Join(t.TempDir(), "out")
		code, out, errb := runExp(t, dir, c.args...)
		if code != 2 || !strings.Contains(errb, c.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out, errb, c.want)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%v: the output folder was made before the flag was refused", c.args)
		}
	}
}

// incomplete is the part of a parts command's report that says it is
// incomplete.
type incomplete struct {
	Status     string `json:"status"`
	Incomplete struct {
		Reason        string   `json:"reason"`
		Signal        string   `json:"signal"`
		FinishedParts []string `json:"finished_parts"`
		CutPart       string   `json:"cut_part"`
		CutRuns       int      `json:"cut_part_runs"`
		FinishedRuns  []struct {
			Arm  string `json:"arm"`
			Seed uint64 `json:"seed"`
		} `json:"finished_runs"`
		NotRun []string `json:"not_run"`
	} `json:"incomplete"`
}

// TestExperimentTimeoutIncomplete: every command stopped by -timeout
// before its work ends says so, on stdout and in its JSON, and exits 1.
func TestExperimentTimeoutIncomplete(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, c := range []struct {
		args []string
		file string
	}{
		{[]string{"lap-pal", "-parts", "pendulum,cartpole"}, "lap-pal.json"},
		{[]string{"ners", "-parts", "stats"}, "ners.json"},
		{[]string{"refer", "-parts", "lqr,td3"}, "refer.json"},
		{[]string{"ter", "-parts", "keydoor"}, "ter.json"},
	} {
		dir := t.TempDir()
		code, out, errb := runExp(t, dir, append(c.args, "-timeout", "1ns")...)
		if code != 1 || !strings.Contains(out, "INCOMPLETE: stopped by -timeout 1ns after") || !strings.Contains(errb, "marked incomplete") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1 and the INCOMPLETE line", c.args, code, out, errb)
			continue
		}
		var r incomplete
		readJSON(t, dir, c.file, &r)
		want := strings.Split(c.args[2], ",")
		if r.Status != "incomplete" || r.Incomplete.Reason != "timeout" || r.Incomplete.Signal != "" ||
			len(r.Incomplete.FinishedParts) != 0 || !slices.Equal(r.Incomplete.NotRun, want) {
			t.Errorf("%v: report %+v", c.args, r)
		}
		if strings.Contains(out, "final") {
			t.Errorf("%v: a stopped run printed a final line:\n%s", c.args, out)
		}
	}

	dir := t.TempDir()
	code, out, errb := runExp(t, dir, "cliffwalk", "-n-min", "2", "-n-max", "3", "-timeout", "1ns")
	if code != 1 || !strings.Contains(out, "INCOMPLETE: stopped by -timeout 1ns after") || !strings.Contains(out, "Not finished (dropped, no medians): n = 2, 3") {
		t.Fatalf("cliffwalk -timeout 1ns: exit %d\n%s\n%s", code, out, errb)
	}
	var cw struct {
		Status, Stopped string
		Rows            []any
		Unfinished      []int
	}
	readJSON(t, dir, "cliffwalk.json", &cw)
	if cw.Status != "incomplete" || cw.Stopped != "stopped by -timeout 1ns" || len(cw.Rows) != 0 || !slices.Equal(cw.Unfinished, []int{2, 3}) {
		t.Errorf("cliffwalk.json %+v", cw)
	}
	if _, err := os.Stat(filepath.Join(dir, "cliffwalk.png")); err == nil {
		t.Error("an incomplete sweep wrote the plot")
	}
}

// TestExperimentInterruptedMidPart: SIGINT after a control part's first
// run finished keeps that run, drops the ones cut short (no final line, no
// table), lists the parts never started, and exits 130.
func TestExperimentInterruptedMidPart(t *testing.T) {
	defer goleak.VerifyNone(t)
	var sigs chan<- os.Signal
	withSignals(t, func(c chan<- os.Signal) { sigs = c })
	var stdout, stderr syncBuffer
	sent := false
	stdout.onWrite = func(p []byte) {
		if !sent && bytes.Contains(p, []byte(" seed 1: final ")) {
			sent = true
			sigs <- syscall.SIGINT
		}
	}
	dir := t.TempDir()
	code := run([]string{"experiment", "ners", "-parts", "stats,pendulum", "-stats-seeds", "2", "-stats-steps", "150", "-workers", "1",
		"-out", dir}, &stdout, &stderr)
	out := stdout.String()
	if code != 130 || !sent {
		t.Fatalf("exit %d (signal sent: %v), want 130\nstdout:\n%s\nstderr:\n%s", code, sent, out, stderr.String())
	}
	var r incomplete
	readJSON(t, dir, "ners.json", &r)
	inc := r.Incomplete
	if r.Status != "incomplete" || inc.Reason != "interrupted" || inc.Signal != "SIGINT" || inc.CutPart != "stats" || inc.CutRuns != 6 ||
		len(inc.FinishedRuns) < 1 || len(inc.FinishedRuns) >= 6 || inc.FinishedRuns[0].Seed != 1 || !slices.Equal(inc.NotRun, []string{"pendulum"}) {
		t.Fatalf("report %+v", r)
	}
	if n := strings.Count(out, ": final "); n != len(inc.FinishedRuns) {
		t.Errorf("%d final lines for %d finished runs:\n%s", n, len(inc.FinishedRuns), out)
	}
	for _, want := range []string{"INCOMPLETE: interrupted by SIGINT after ", "Cut short: stats (", " of 6 runs finished: uniform seed 1",
		"the runs cut short are dropped", "Not run: pendulum."} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "sd(|TD|)") {
		t.Errorf("a cut part printed its table:\n%s", out)
	}
	if want := "apex experiment ners: interrupted by SIGINT: stopping"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr.String(), want)
	}
}

// TestExperimentCliffwalkInterrupted: SIGHUP stops the sweep between
// runs; the finished rows are kept, marked incomplete, and the exit is
// 129. A second signal exits at once.
func TestExperimentCliffwalkInterrupted(t *testing.T) {
	defer goleak.VerifyNone(t)
	exited := make(chan int, 1)
	old := exitNow
	exitNow = func(code int) { exited <- code }
	t.Cleanup(func() { exitNow = old })
	withSignals(t, func(c chan<- os.Signal) { c <- syscall.SIGHUP; c <- syscall.SIGTERM })
	var stdout, stderr syncBuffer
	dir := t.TempDir()
	// n = 10 takes long enough (thousands of updates per run) for the
	// signal to land before the row ends.
	code := run([]string{"experiment", "cliffwalk", "-n-min", "10", "-n-max", "11", "-seeds", "2", "-out", dir}, &stdout, &stderr)
	if code != 129 {
		t.Fatalf("exit %d, want 129\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	select {
	case c := <-exited:
		if c != 143 {
			t.Errorf("second signal SIGTERM: exit %d, want 143", c)
		}
	case <-time.After(5 * time.Second):
		t.Error("the second signal did not exit")
	}
	if want := "second interrupt (SIGTERM): exiting now"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr.String(), want)
	}
	var cw struct {
		Status, Stopped string
		Unfinished      []int
	}
	readJSON(t, dir, "cliffwalk.json", &cw)
	if cw.Status != "incomplete" || cw.Stopped != "interrupted by SIGHUP" || !slices.Contains(cw.Unfinished, 11) {
		t.Errorf("cliffwalk.json %+v", cw)
	}
	if !strings.Contains(stdout.String(), "INCOMPLETE: interrupted by SIGHUP") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
}
