package main

import (
	"bytes"
	"encoding/json"
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
