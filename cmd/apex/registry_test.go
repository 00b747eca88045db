package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
)

// cliStage is the test-only method's stage: uniform selection counting
// its Sample calls, with the option it was built with.
type cliStage struct {
	*sampler.Uniform
	tag     float64
	samples atomic.Int64
}

func (c *cliStage) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	c.samples.Add(1)
	return c.Uniform.Sample(rng, dst)
}

// lastCLIStage is the stage the test-only method built last.
var lastCLIStage atomic.Pointer[cliStage]

// The test-only method "cli-counted", registered from this file alone:
// the command line offers it and its flag without any other change.
func init() {
	if err := sampler.Register(sampler.Spec{
		Name:     "cli-counted",
		Doc:      "test only: uniform selection counting its Sample calls",
		Options:  []sampler.Option{{Name: "cli-counted-tag", Usage: "cli-counted: a count the stage keeps (0: none)", Int: true}},
		Learners: []string{"dqn"},
		Build: func(buf *buffer.Buffer, cfg sampler.MethodConfig) (sampler.Method, error) {
			st := &cliStage{Uniform: sampler.NewUniform(buf), tag: cfg.Option("cli-counted-tag")}
			lastCLIStage.Store(st)
			return sampler.Method{Selector: st, Weighter: st.Uniform}, nil
		},
	}); err != nil {
		panic(err)
	}
}

// TestTrainRegisteredMethod: `apex train -sampler=cli-counted
// -cli-counted-tag=9` parses the registered method's flag, trains with its
// stage (Sample called every learner step, the option reached it) and
// records its option; -h lists the method and its flag; the flag is
// refused on another method and when negative, naming it.
func TestTrainRegisteredMethod(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"train", "-h"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String()+stderr.String(), "-cli-counted-tag int") ||
		!strings.Contains(stdout.String()+stderr.String(), "cli-counted: a count the stage keeps") ||
		!strings.Contains(stdout.String()+stderr.String(), ", ners, cli-counted") {
		t.Fatalf("train -h: exit %d; want the method and its flag listed:\n%s%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"methods"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "cli-counted\n    test only: uniform selection counting its Sample calls\n    learners: dqn\n    -cli-counted-tag int: cli-counted: a count") ||
		!strings.Contains(stdout.String(), "\nlap\n") || !strings.Contains(stdout.String(), "-refer-d float") {
		t.Errorf("apex methods: exit %d:\n%s", code, stdout.String())
	}
	dir := t.TempDir()
	stdout.Reset()
	stderr.Reset()
	code := run([]string{"train", "-deterministic", "-steps=40", "-sampler=cli-counted", "-cli-counted-tag=9", "-min-replay=200",
		"-batch=16", "-checkpoint=none", "-progress=0", "-out", dir}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	st := lastCLIStage.Load()
	if st == nil || st.tag != 9 || st.samples.Load() != 40 {
		t.Fatalf("stage %+v: want tag 9 and 40 Sample calls", st)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res runtime.TrainResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.Config.Sampler != "cli-counted" || res.Config.Option("cli-counted-tag") != 9 || res.LearnerSteps != 40 {
		t.Errorf("results: sampler %q, options %v, %d learner steps", res.Config.Sampler, res.Config.MethodOptions, res.LearnerSteps)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-sampler=per", "-cli-counted-tag=3"}, "-cli-counted-tag configures the cli-counted method; this run's method is per"},
		{[]string{"-sampler=cli-counted", "-cli-counted-tag=-2"}, "apex: -cli-counted-tag must not be negative, got -2"},
		{[]string{"-sampler=cli-counted", "-ter-eta=0.5"}, "-ter-eta configures the ter method; this run's method is cli-counted"},
	} {
		stderr.Reset()
		args := append(c.args, "-steps=1", "-checkpoint=none", "-out", t.TempDir())
		if code := run(args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// TestMethodOptionShadowingAFlag: a method option named like one of the
// command's flags is reported, naming the option and its method, not a
// panic of the flag package.
func TestMethodOptionShadowingAFlag(t *testing.T) {
	fs := flag.NewFlagSet("apex train", flag.ContinueOnError)
	fs.Float64("ter-eta", 0, "a flag of the command's own")
	_, err := methodFlags(fs)
	if err == nil || !strings.Contains(err.Error(), "-ter-eta (of ter)") {
		t.Fatalf("methodFlags over a flag set that has -ter-eta: %v; want an error naming the option and its method", err)
	}
}
