package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// The bench tests start goroutines (through bench.Run); each checks that
// none is left behind. (Per test, not VerifyTestMain, so this file does not
// claim the package's TestMain.)

func TestBenchJSON(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "-actors=4", "-capacity=4096", "-duration=200ms", "-solo-duration=100ms", "-seed=3", "-json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	fields := []string{"inserts_per_sec", "samples_per_sec", "updates_per_sec", "learner_step_p50_us",
		"learner_step_p99_us", "learner_step_p999_us", "learner_step_max_us", "stale_updates_dropped",
		"solo_samples_per_sec", "load_to_solo"}
	for _, f := range append(fields, "apex_to_baseline", "apex_to_baseline_solo", "gomaxprocs", "go_version", "num_cpu", "flags", "baseline") {
		if _, ok := m[f]; !ok {
			t.Errorf("JSON lacks %q", f)
		}
	}
	for _, f := range []string{"inserts_per_sec", "samples_per_sec", "updates_per_sec"} {
		if v, _ := m[f].(float64); v <= 0 {
			t.Errorf("%s = %v, want > 0", f, m[f])
		}
	}
	base, _ := m["baseline"].(map[string]any)
	for _, f := range fields {
		if _, ok := base[f]; !ok {
			t.Errorf("JSON baseline lacks %q", f)
		}
	}
	flags, _ := m["flags"].(map[string]any)
	for name, want := range map[string]string{
		"actors": "4", "batch": "32", "learner-batch": "256", "capacity": "4096", "duration": "200ms",
		"stripes": "0", "seed": "3", "json": "true", "baseline": "true", "solo": "true",
	} {
		if got, _ := flags[name].(string); got != want {
			t.Errorf("flags[%q] = %q, want %q", name, got, want)
		}
	}
}

func TestBenchTable(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "-actors=2", "-capacity=4096", "-duration=100ms", "-solo=false", "-baseline=false"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	s := out.String()
	for _, want := range []string{"inserts/s", "sampled transitions/s", "step p99.9 µs", "targets (apex)"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "mutex baseline") || strings.Contains(s, "solo sampled/s") {
		t.Errorf("-baseline=false -solo=false still reports them:\n%s", s)
	}
}

func TestBenchBadFlags(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct{ arg, want string }{
		{"-actors=0", "actors must be >= 1, got 0"},
		{"-actors=x", `invalid value "x" for flag -actors`},
		{"-batch=0", "batch must be >= 1, got 0"},
		{"-learner-batch=-3", "learner-batch must be in [1, capacity=1048576], got -3"},
		{"-capacity=0", "capacity must be in [1, 67108864], got 0"},
		{"-stripes=3", "stripes must be 0 or a power of two <= capacity (1048576), got 3"},
		{"-duration=0s", "duration must be positive, got 0s"},
		{"-duration=soon", `invalid value "soon" for flag -duration`},
		{"-inserters=-1", "inserters must be >= 0, got -1"},
		{"-queue=0", "queue must be >= 1, got 0"},
		{"-json=maybe", `invalid boolean value "maybe" for -json`},
		{"-nosuchflag", "flag provided but not defined: -nosuchflag"},
		{"extra", `unexpected argument "extra"`},
	} {
		var out, errOut bytes.Buffer
		if code := run([]string{"bench", tc.arg}, &out, &errOut); code != 2 {
			t.Errorf("%s: exit %d, want 2", tc.arg, code)
		}
		if !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%s: stderr lacks %q:\n%s", tc.arg, tc.want, errOut.String())
		}
		if out.Len() != 0 {
			t.Errorf("%s: wrote to stdout:\n%s", tc.arg, out.String())
		}
	}
}

func TestBenchHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"bench", "-h"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	for _, f := range []string{"actors", "batch", "learner-batch", "capacity", "duration", "solo-duration",
		"stripes", "inserters", "queue", "seed", "json", "baseline", "solo", "cpuprofile"} {
		if !strings.Contains(out.String(), "\n  -"+f+" ") && !strings.Contains(out.String(), "\n  -"+f+"\n") {
			t.Errorf("-h does not document -%s:\n%s", f, out.String())
		}
	}
}

// TestBenchProgress: apex bench says, on stderr, how long it will take and
// which phase it is in as each starts; stdout keeps only the report.
func TestBenchProgress(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "-actors=2", "-capacity=4096", "-duration=100ms", "-solo-duration=50ms", "-noise-duration=50ms", "-json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	for _, want := range []string{
		"apex bench: about 450ms of timed phases",
		"apex: filling 4096 slots",
		"apex: the learner alone for 50ms",
		"apex: the learner under the load of 2 actors for 100ms",
		"machine noise: a CPU-only loop of",
		"mutex baseline: filling 4096 slots",
		"mutex baseline: the learner under the load of 2 actors for 100ms",
		"mutex baseline on apex's insert path: the learner under the load of 2 actors",
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out.String())
	}
	if _, ok := m["interrupted"]; ok {
		t.Errorf("a whole run reports interrupted: %v", m["interrupted"])
	}
}

// TestBenchInterrupt: Ctrl-C during the load phase prints the figures
// measured so far (the solo phase's, and the load's over the time it ran),
// marked interrupted and without targets, and exits 130.
func TestBenchInterrupt(t *testing.T) {
	defer goleak.VerifyNone(t)
	var sigs chan<- os.Signal
	withSignals(t, func(c chan<- os.Signal) { sigs = c })
	var out bytes.Buffer
	errOut := &syncBuffer{}
	errOut.onWrite = func(p []byte) {
		if bytes.Contains(p, []byte("apex: the learner under the load")) {
			sigs <- os.Interrupt
		}
	}
	for _, asJSON := range []bool{true, false} {
		out.Reset()
		// Without the signal the run would take minutes.
		args := []string{"bench", "-actors=2", "-capacity=4096", "-duration=2m", "-solo-duration=100ms"}
		if asJSON {
			args = append(args, "-json")
		}
		code := run(args, &out, errOut)
		if code != 130 || !strings.Contains(errOut.String(), "apex bench: interrupted after") {
			t.Fatalf("exit %d, want 130; stderr:\n%s", code, errOut.String())
		}
		if !asJSON {
			for _, want := range []string{"INTERRUPTED: the figures measured so far", "solo sampled/s", "not checked, the run was interrupted"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, out.String())
				}
			}
			continue
		}
		var rep struct {
			Interrupted bool            `json:"interrupted"`
			SoloSamples float64         `json:"solo_samples_per_sec"`
			Baseline    json.RawMessage `json:"baseline"`
			Targets     []any           `json:"targets"`
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out.String())
		}
		if !rep.Interrupted || rep.SoloSamples <= 0 || rep.Baseline != nil || rep.Targets != nil {
			t.Errorf("report: %s", out.String())
		}
	}
}

// TestBenchLearner: -learner measures the default DQN, TD3 and SAC learners,
// float64 and float32, at each -procs, and reports them as JSON and as a
// table; replay-path flags and bad -procs are usage errors.
func TestBenchLearner(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"bench", "-learner", "-duration=30ms", "-procs=1,2", "-seed=2", "-json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	var rep struct {
		NumCPU  int `json:"num_cpu"`
		Results []struct {
			Learner       string  `json:"learner"`
			Precision     string  `json:"precision"`
			Procs         int     `json:"gomaxprocs"`
			Batch         int     `json:"batch"`
			Steps         int64   `json:"steps"`
			UpdatesPerSec float64 `json:"updates_per_s"`
		} `json:"results"`
		Flags map[string]string `json:"flags"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, fmt.Sprintf("%s/%s/%d/B=%d", r.Learner, r.Precision, r.Procs, r.Batch))
		if r.Steps <= 0 || !(r.UpdatesPerSec > 0) {
			t.Errorf("%s %s GOMAXPROCS=%d: %d steps, %v updates/s", r.Learner, r.Precision, r.Procs, r.Steps, r.UpdatesPerSec)
		}
	}
	want := "dqn/float64/1/B=64 dqn/float64/2/B=64 dqn/float32/1/B=64 dqn/float32/2/B=64 " +
		"td3/float64/1/B=256 td3/float64/2/B=256 td3/float32/1/B=256 td3/float32/2/B=256 " +
		"sac/float64/1/B=256 sac/float64/2/B=256 sac/float32/1/B=256 sac/float32/2/B=256"
	if strings.Join(got, " ") != want || rep.NumCPU <= 0 || rep.Flags["learner"] != "true" {
		t.Fatalf("cells %v, num_cpu %d, flags %v; want %s", got, rep.NumCPU, rep.Flags, want)
	}

	// -workers: each learner at each W (0: W = GOMAXPROCS).
	out.Reset()
	errOut.Reset()
	if code := run([]string{"bench", "-learner", "-duration=20ms", "-procs=2", "-workers=1,0", "-json"}, &out, &errOut); code != 0 {
		t.Fatalf("-workers: exit %d, stderr:\n%s", code, errOut.String())
	}
	var wrep struct {
		Results []struct {
			Learner   string `json:"learner"`
			Precision string `json:"precision"`
			Workers   int    `json:"workers"`
			Steps     int64  `json:"steps"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out.Bytes(), &wrep); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, r := range wrep.Results {
		got = append(got, fmt.Sprintf("%s/%s/W=%d", r.Learner, r.Precision, r.Workers))
		if r.Steps <= 0 {
			t.Errorf("%s %s W=%d: %d steps", r.Learner, r.Precision, r.Workers, r.Steps)
		}
	}
	if want := "dqn/float64/W=1 dqn/float64/W=2 dqn/float32/W=1 dqn/float32/W=2 td3/float64/W=1 td3/float64/W=2 td3/float32/W=1 td3/float32/W=2 " +
		"sac/float64/W=1 sac/float64/W=2 sac/float32/W=1 sac/float32/W=2"; strings.Join(got, " ") != want {
		t.Errorf("-workers=1,0 at -procs=2: cells %v, want %s", got, want)
	}

	out.Reset()
	errOut.Reset()
	if code := run([]string{"bench", "-learner", "-duration=10ms", "-procs=1"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "dqn  float32 B=64") || !strings.Contains(out.String(), "td3  float32/float64:") ||
		!strings.Contains(out.String(), "sac  float32 B=256") || !strings.Contains(out.String(), "sac  float32/float64:") {
		t.Fatalf("table: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-learner", "-actors=4"}, "-actors does not apply to -learner"},
		{[]string{"-learner", "-procs=1,x"}, "is not a positive integer"},
		{[]string{"-learner", "-procs=0"}, "is not a positive integer"},
		{[]string{"-learner", "-duration=0s"}, "must be positive"},
		{[]string{"-procs=2"}, "-procs needs -learner"},
		{[]string{"-workers=2"}, "-workers needs -learner"},
		{[]string{"-learner", "-workers=-1"}, "is not a non-negative integer"},
	} {
		errOut.Reset()
		if code := run(append([]string{"bench"}, c.args...), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errOut.String(), c.want)
		}
	}
}
