package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/apexrl/apex/bench"
	"github.com/apexrl/apex/runtime"
)

const benchUsage = `usage: apex bench [flags]

Load-tests the replay path: -actors goroutines fill batches of -batch
CartPole-sized transitions (44 bytes) and send them over a bounded channel to
-inserters goroutines that insert them into a full buffer of -capacity slots,
while one learner loops over steps of sample(-learner-batch) + write-back of
-learner-batch random priorities, for -duration. The same load then runs
against a mutex baseline (a binary float64 sum tree under one sync.Mutex),
and each learner is also timed alone (solo). Reports inserts/s, sampled
transitions/s, priority updates/s, learner step latency percentiles, stale
write-backs dropped, and the ratios under load/solo and apex/baseline.
A line on stderr marks each phase as it starts; Ctrl-C prints the figures
measured so far and exits 130 (a second Ctrl-C exits at once).

Typical: GOMAXPROCS=2 apex bench -actors=64 -duration=10s -json

With -learner it measures learner compute instead: updates/s of the default
DQN learner (CartPole 4-64-64-2, PER, batch 64), TD3 learner (Pendulum,
64-64 actor and critics, uniform, batch 256) and SAC learner (Pendulum,
64-64 policy and twin critics, uniform, batch 256) on a filled buffer of
random transitions, with float64 and float32 networks (-float32 of apex
train, its default), at
GOMAXPROCS 1, 2, ... NumCPU (-procs) and learner workers -workers (the
data-parallel step of apex train -learner-workers; default 1; 0 means W =
GOMAXPROCS),
-duration each (default 2s there). Only -duration, -procs, -workers, -seed,
-json and -cpuprofile apply to it.

Typical: apex bench -learner -duration=3s
Scaling curve: apex bench -learner -procs=1,2,4,8,16 -workers=0 -duration=2s

flags:
`

// runBench is `apex bench`: it parses flags, runs the load test and writes
// the report (a table, or JSON with -json). Exit status: 0 success, 1 run
// failure, 2 usage error.
func runBench(args []string, stdout, stderr io.Writer) int {
	def := bench.DefaultConfig()
	cfg := def
	fs := flag.NewFlagSet("apex bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Actors, "actors", def.Actors, "number of actor goroutines (>= 1)")
	fs.IntVar(&cfg.Batch, "batch", def.Batch, "transitions per actor batch (>= 1)")
	fs.IntVar(&cfg.LearnerBatch, "learner-batch", def.LearnerBatch, "items sampled and priorities written back per learner step (1..capacity)")
	fs.IntVar(&cfg.Capacity, "capacity", def.Capacity, fmt.Sprintf("buffer capacity in transitions, for both backends (1..%d)", bench.MaxCapacity))
	fs.DurationVar(&cfg.Duration, "duration", def.Duration, "length of each backend's load phase (and solo phase unless -solo-duration is set)")
	fs.DurationVar(&cfg.SoloDuration, "solo-duration", 0, "length of each backend's solo learner phase; 0 means -duration")
	fs.DurationVar(&cfg.NoiseDuration, "noise-duration", 0, "length of the machine-noise probe (a CPU-only loop as long as the learner's median step); 0 means min(-duration, 2s), negative skips it")
	fs.IntVar(&cfg.Stripes, "stripes", def.Stripes, "apex buffer stripes: 0 for the buffer's default, else a power of two <= capacity")
	fs.IntVar(&cfg.Inserters, "inserters", def.Inserters, "inserter goroutines draining the actors' channel; 0: actors call Insert directly")
	fs.IntVar(&cfg.BaselineInserters, "baseline-inserters", def.BaselineInserters, "the same for the mutex baseline; 0 (default): every actor inserts under its mutex, as a Go user would (performance.md §3)")
	fs.BoolVar(&cfg.BaselineSamePath, "baseline-same-path", def.BaselineSamePath, "also run the baseline through apex's insert path (-inserters), comparing the data structures under one topology")
	fs.IntVar(&cfg.Queue, "queue", def.Queue, "capacity of the actors' channel, in batches (>= 1)")
	fs.Uint64Var(&cfg.Seed, "seed", def.Seed, "seed of the learner's sampling and of the priorities written back")
	fs.BoolVar(&cfg.Baseline, "baseline", def.Baseline, "also run the mutex baseline under the same load (-baseline=false skips it)")
	fs.BoolVar(&cfg.Solo, "solo", def.Solo, "also time each learner alone, for the under-load/solo ratio (-solo=false skips it)")
	learnerMode := fs.Bool("learner", false, "measure learner compute (updates/s of the default DQN, TD3 and SAC learners, float64 and float32, at each -procs and -workers) instead of the replay path")
	workers := fs.String("workers", "", "with -learner: comma-separated learner worker counts W per GOMAXPROCS (0: W = GOMAXPROCS; empty: 1)")
	procs := fs.String("procs", "", "with -learner: comma-separated GOMAXPROCS values (empty: 1, 2, ... NumCPU)")
	asJSON := fs.Bool("json", false, "write the report as one JSON object instead of a table")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *learnerMode {
		return runLearnerBench(fs, set, cfg, *procs, *workers, *asJSON, *cpuProfile, stdout, stderr)
	}
	for _, name := range []string{"procs", "workers"} {
		if set[name] {
			fmt.Fprintf(stderr, "apex bench: -%s needs -learner (see apex bench -h)\n", name)
			return 2
		}
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "apex bench: invalid flags: %v (see apex bench -h)\n", err)
		return 2
	}

	start := time.Now()
	ctx, progress, interrupted, done, ok := startBench(*cpuProfile, fmt.Sprintf("about %v of timed phases", cfg.Estimate()), stderr)
	if !ok {
		return 1
	}
	defer done()
	cfg.Progress = progress
	rep, err := bench.Run(ctx, cfg)
	if err != nil && (rep == nil || !rep.Interrupted) {
		fmt.Fprintf(stderr, "apex bench: %v\n", err)
		return 1
	}
	rep.Flags = map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { rep.Flags[f.Name] = f.Value.String() })

	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // targets read "< 100", not "\u003c 100"
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "apex bench: %v\n", err)
			return 1
		}
	} else if err := rep.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "apex bench: %v\n", err)
		return 1
	}
	if rep.Interrupted {
		code := 130
		if s := interrupted(); s != nil {
			code = signalExitCode(s)
		}
		fmt.Fprintf(stderr, "apex bench: interrupted after %.1fs: the report above holds the figures measured so far\n", time.Since(start).Seconds())
		return code
	}
	return 0
}

// runLearnerBench is `apex bench -learner`: the learner-compute mode
// (bench.RunLearner), with the flags already parsed (set: those given).
func runLearnerBench(fs *flag.FlagSet, set map[string]bool, cfg bench.Config, procs, workers string, asJSON bool, cpuProfile string, stdout, stderr io.Writer) int {
	for name := range set {
		switch name {
		case "learner", "duration", "procs", "workers", "seed", "json", "cpuprofile":
		default:
			fmt.Fprintf(stderr, "apex bench: -%s does not apply to -learner (only -duration, -procs, -workers, -seed, -json, -cpuprofile do)\n", name)
			return 2
		}
	}
	lc := bench.LearnerConfig{Seed: cfg.Seed}
	if set["duration"] {
		if cfg.Duration <= 0 {
			fmt.Fprintf(stderr, "apex bench: -duration=%v must be positive\n", cfg.Duration)
			return 2
		}
		lc.Duration = cfg.Duration
	}
	if procs != "" {
		for _, f := range strings.Split(procs, ",") {
			p, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || p < 1 {
				fmt.Fprintf(stderr, "apex bench: -procs=%q: %q is not a positive integer\n", procs, f)
				return 2
			}
			lc.Procs = append(lc.Procs, p)
		}
	}
	if workers != "" {
		for _, f := range strings.Split(workers, ",") {
			w, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || w < 0 {
				fmt.Fprintf(stderr, "apex bench: -workers=%q: %q is not a non-negative integer (0: W = GOMAXPROCS)\n", workers, f)
				return 2
			}
			lc.Workers = append(lc.Workers, w)
		}
	}
	lc, err := lc.Validate()
	if err != nil {
		fmt.Fprintf(stderr, "apex bench: invalid flags: %v (see apex bench -h)\n", err)
		return 2
	}
	ctx, progress, interrupted, done, ok := startBench(cpuProfile,
		fmt.Sprintf("about %v of timed cells", 4*time.Duration(len(lc.Procs)*len(lc.Workers))*lc.Duration), stderr)
	if !ok {
		return 1
	}
	defer done()
	lc.Progress = progress
	rep, err := bench.RunLearner(ctx, lc)
	if err != nil && (rep == nil || !rep.Interrupted) {
		fmt.Fprintf(stderr, "apex bench: %v\n", err)
		return 1
	}
	rep.CPUModel = runtime.Machine().CPUModel
	rep.Flags = map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { rep.Flags[f.Name] = f.Value.String() })
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "apex bench: %v\n", err)
			return 1
		}
	} else if err := rep.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "apex bench: %v\n", err)
		return 1
	}
	if rep.Interrupted {
		code := 130
		if s := interrupted(); s != nil {
			code = signalExitCode(s)
		}
		return code
	}
	return 0
}

// startBench starts what both modes of apex bench run under: a CPU profile
// written to cpuProfile (if set), a progress printer stamping each line
// with the elapsed time, and the signal watch (the first signal stops the
// run and the figures so far are reported, a second exits at once). It
// announces the run's length (about). done stops the watch and the
// profile; ok is false, after saying why on stderr, if the profile could
// not be started.
func startBench(cpuProfile, about string, stderr io.Writer) (ctx context.Context, progress func(string), interrupted func() os.Signal, done func(), ok bool) {
	stopProfile := func() {}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "apex bench: %v\n", err)
			return nil, nil, nil, nil, false
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			fmt.Fprintf(stderr, "apex bench: %v\n", err)
			return nil, nil, nil, nil, false
		}
		stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
	}
	start := time.Now()
	progress = func(line string) {
		fmt.Fprintf(stderr, "apex bench: %5.1fs  %s\n", time.Since(start).Seconds(), line)
	}
	fmt.Fprintf(stderr, "apex bench: %s, plus the fills (Ctrl-C prints the figures so far)\n", about)
	ctx, interrupted, stopWatching := watchSignals(func(s os.Signal) {
		fmt.Fprintf(stderr, "apex bench: interrupted (%s): stopping; the figures so far follow (a second signal exits at once)\n", signalName(s))
	}, func(s os.Signal) {
		fmt.Fprintf(stderr, "apex bench: second interrupt (%s): exiting now, without a report\n", signalName(s))
	})
	return ctx, progress, interrupted, func() { stopWatching(); stopProfile() }, true
}
