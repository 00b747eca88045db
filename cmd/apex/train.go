package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
)

const trainUsage = `usage: apex [train] [flags]

Trains an agent with Ape-X: -actors goroutines step their own environment
copies and send n-step transitions to the replay buffer; one learner samples
batches through the -sampler method, learns and writes priorities back.
Discrete environments train Double DQN (per-actor epsilon-greedy actors that
compute initial priorities with their copy of the network); continuous ones
train TD3 (-algo=td3: Gaussian exploration noise, new items at the maximum
priority) or, with -algo=sac, SAC (a squashed-Gaussian policy that explores
with its own noise, its temperature tuned toward entropy -|A|). Prints progress every few seconds, evaluates the greedy
policy periodically, and writes results.json and curve.png to -out, and a
checkpoint every -checkpoint-every and at the end.

SIGINT, SIGTERM and SIGHUP stop the run gracefully (final evaluation,
results and checkpoint written; exit status 128+signal: 130 for Ctrl-C); a
second signal exits at once. Exit status 0: stopped as asked (solved,
-steps or -duration); 1: the run failed or its results or checkpoint could
not be written; 2: a usage error, found before any training.

flags:
`

// runTrain parses the train flags, trains, and writes the results.
func runTrain(args []string, stdout, stderr io.Writer) int {
	def := runtime.DefaultTrainConfig()
	cfg := def
	fs := flag.NewFlagSet("apex", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addRunFlags(fs, &cfg)
	addLearnerFlags(fs, &cfg)
	fs.BoolVar(&cfg.Deterministic, "deterministic", false, "one actor and the learner in lockstep on one goroutine: the same -seed and -steps give the same run (needs -actors=1 -steps=N -duration=0)")
	fs.Var((*insertersFlag)(&cfg.Inserters), "inserters", "goroutines that move the actors' batches from their bounded channel into the replay, or \"direct\": each actor inserts its own (0: runtime.DefaultInserters, 1; not with -deterministic)")
	fs.StringVar(&cfg.Checkpoint, "checkpoint", "", "write a checkpoint (replay, learner, counters) to this file every -checkpoint-every and when the run ends (default <out>/checkpoint.apex, also on -resume; \"none\": no checkpoint)")
	fs.DurationVar(&cfg.CheckpointEvery, "checkpoint-every", def.CheckpointEvery, "time between periodic checkpoints while the run trains (0: only when the run ends)")
	resume := fs.String("resume", "", "continue the run saved in this checkpoint; -steps, -duration, -actors, -target-return, -stop-when-solved and the exploration flags may change, the rest comes from the checkpoint; the checkpoint is written to -checkpoint (default <out>/checkpoint.apex), never back to FILE unless -checkpoint names it")
	out := fs.String("out", "out/train", "directory for results.json and curve.png")
	progressEvery := fs.Duration("progress", 5*time.Second, "time between progress reports (0: none)")
	obs := addObsFlags(fs, true)
	// Every registered method's options: -ter-eta, -lap-k, ... (after the
	// command's own flags, so that a method's option taking one of their
	// names is reported instead of panicking).
	methodOpts, err := methodFlags(fs)
	if err != nil {
		fmt.Fprintf(stderr, "apex: %v\n", err)
		return 2
	}
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), trainUsage)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	log, err := obs.logger(stdout)
	if err != nil {
		fmt.Fprintf(stderr, "apex: %v\n", err)
		return 2
	}
	var bar io.Writer
	if obs.logFormat == "text" && isTerminal(stdout) {
		bar = stdout
	}
	if err := checkRunFlags(fs, &cfg, methodOpts); err != nil {
		fmt.Fprintf(stderr, "apex: %v\n", err)
		return 2
	}
	if *progressEvery < 0 {
		fmt.Fprintf(stderr, "apex: -progress must not be negative, got %v (0: no progress records)\n", *progressEvery)
		return 2
	}
	switch cfg.Checkpoint {
	case "": // a failed run (a NaN, say) always leaves its state behind
		cfg.Checkpoint = filepath.Join(*out, "checkpoint.apex")
	case "none":
		cfg.Checkpoint = ""
	}
	set := flagsSet(fs)
	if cfg.Deterministic { // one actor and no time limit, unless asked otherwise (then refused below)
		if !set["actors"] {
			cfg.Actors = 1
		}
		if !set["duration"] {
			cfg.Duration = 0
		}
		if cfg.Actors != 1 || cfg.Steps <= 0 || cfg.Duration != 0 {
			fmt.Fprintf(stderr, "apex: -deterministic needs -actors=1, -steps=N (N > 0) and -duration=0 (got -actors=%d -steps=%d -duration=%v)\n",
				cfg.Actors, cfg.Steps, cfg.Duration)
			return 2
		}
	}
	// The output folder is made and proved writable before any work, so a
	// run never trains only to lose its results (and the default checkpoint
	// goes there too).
	if err := prepareOut(*out); err != nil {
		fmt.Fprintf(stderr, "apex: %v\n", err)
		return 2
	}
	var tr *runtime.Trainer
	if *resume != "" {
		tr, err = runtime.ResumeTrainer(*resume, func(c *runtime.TrainConfig) {
			for name, apply := range map[string]func(){
				"steps": func() { c.Steps = cfg.Steps }, "duration": func() { c.Duration = cfg.Duration },
				"actors": func() { c.Actors = cfg.Actors }, "target-return": func() { c.TargetReturn = cfg.TargetReturn },
				"stop-when-solved": func() { c.StopWhenSolved = cfg.StopWhenSolved },
				"env":              func() { c.Env = cfg.Env }, "sampler": func() { c.Sampler = cfg.Sampler }, "seed": func() { c.Seed = cfg.Seed },
				"batch": func() { c.Batch = cfg.Batch }, "lr": func() { c.LR = cfg.LR }, "n-step": func() { c.NStep = cfg.NStep },
				"capacity": func() { c.Capacity = cfg.Capacity }, "dueling": func() { c.Dueling = cfg.Dueling },
				"float32": func() { c.Float32 = cfg.Float32 }, "learner-workers": func() { c.LearnerWorkers = cfg.LearnerWorkers },
				"replay-ratio": func() { c.ReplayRatio = cfg.ReplayRatio }, "deterministic": func() { c.Deterministic = cfg.Deterministic },
				"min-replay": func() { c.MinSizeToSample = cfg.MinSizeToSample }, "refresh-every": func() { c.RefreshEvery = cfg.RefreshEvery },
				"algo": func() { c.Algo = cfg.Algo }, "loss": func() { c.Loss = cfg.Loss },
				"tau": func() { c.Tau = cfg.Tau }, "no-is": func() { c.NoIS = cfg.NoIS },
				"epsilon": func() { c.Epsilon = cfg.Epsilon }, "epsilon-decay": func() { c.EpsilonDecaySteps = cfg.EpsilonDecaySteps },
				"sigma": func() { c.Sigma = cfg.Sigma }, "ou-theta": func() { c.OUTheta = cfg.OUTheta },
				"random-steps": func() { c.RandomSteps = cfg.RandomSteps },
				"inserters":    func() { c.Inserters = cfg.Inserters },
			} {
				if set[name] { // shaping flags reach ResumeTrainer, which refuses a change
					apply()
				}
			}
			for _, o := range sampler.Options() {
				if set[o.Name] { // a method option is shaping too
					*c = c.WithOption(o.Name, cfg.Option(o.Name))
				}
			}
			if set["stop-when-solved"] && !cfg.StopWhenSolved && !set["target-return"] {
				c.TargetReturn = 0 // the saved config holds the threshold the flag derived
			}
			// The checkpoint flags are this run's, never the file's: a
			// resumed copy must not write over the run it was copied from.
			c.Checkpoint, c.CheckpointEvery = cfg.Checkpoint, cfg.CheckpointEvery
		})
		if err != nil {
			fmt.Fprintf(stderr, "apex: -resume: %v\n", err)
			return 2
		}
	} else if tr, err = runtime.NewTrainer(cfg); err != nil {
		fmt.Fprintf(stderr, "apex: %v\n", err)
		return 2
	}
	for _, w := range tr.Warnings() {
		log.Warn("warning", "warning", w) // the replay method's, and a resume's precision conversion
	}
	metrics, err := obs.startMetrics(func() (*prometheus.Registry, error) { return newMetricsRegistry(tr.Stats, tr.Config()) }, log)
	if err != nil {
		fmt.Fprintf(stderr, "apex: %v\n", err)
		return 1
	}
	ckpt := tr.Config().Checkpoint
	ctx, interrupted, stopWatching := watchSignals(func(s os.Signal) {
		log.Warn("interrupted: stopping; the results and the checkpoint are being written (a second signal exits at once)",
			"signal", signalName(s))
	}, func(s os.Signal) {
		fmt.Fprintf(stderr, "apex: second interrupt (%s): exiting now; %s\n", signalName(s), lastCheckpoint(ckpt))
	})
	defer stopWatching()
	done := make(chan struct{})
	var printer sync.WaitGroup
	printer.Go(func() { progress(tr, log, bar, *progressEvery, done, nil) })
	res, err := tr.Run(ctx)
	close(done)
	printer.Wait()
	code := 0
	if metrics != nil {
		if cerr := metrics.Close(metricsShutdownTimeout); cerr != nil {
			fmt.Fprintf(stderr, "apex: %v\n", cerr)
		}
	}
	// A result comes back also when only its checkpoint failed: record it
	// before reporting the error.
	if res != nil {
		if werr := writeResults(*out, res); werr != nil {
			fmt.Fprintf(stderr, "apex: results: %v\n", werr)
			code = 1
		} else {
			wrote := ckpt
			var ce *runtime.CheckpointError
			if errors.As(err, &ce) || ckpt == "" {
				wrote = "none"
			}
			log.Info("done", "stop_reason", res.StopReason, "final_return", round1(res.FinalReturn), "episodes", len(res.FinalReturns),
				"solved", res.StoppedByTarget, "seconds", round1(res.Seconds), "env_steps", res.EnvSteps,
				"env_steps_per_s", round1(res.EnvStepsPerSec), "learner_steps", res.LearnerSteps,
				"updates_per_s", round1(res.UpdatesPerSec), "results", filepath.Join(*out, "results.json"),
				"curve", filepath.Join(*out, "curve.png"), "checkpoint", wrote)
		}
	}
	if err != nil {
		var ce *runtime.CheckpointError
		if errors.As(err, &ce) && res != nil && code == 0 {
			fmt.Fprintf(stderr, "apex: %v (the results were written to %s)\n", err, *out)
		} else {
			fmt.Fprintf(stderr, "apex: %v\n", err)
		}
		return 1
	}
	if code != 0 {
		return code
	}
	if sig := interrupted(); sig != nil && res.StopReason == runtime.StopInterrupted {
		fmt.Fprintf(stderr, "apex: interrupted by %s after %.1fs: results written to %s%s\n", signalName(sig), res.Seconds, *out, ckptNote(ckpt))
		return signalExitCode(sig)
	}
	return 0
}

// ckptNote is ", checkpoint written to PATH", or "" without a checkpoint.
func ckptNote(path string) string {
	if path == "" {
		return ""
	}
	return ", checkpoint written to " + path
}

// prepareOut creates the output folder dir and proves it writable by
// creating and removing a file in it, so that a run that cannot keep its
// results is refused before it trains.
func prepareOut(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-out %s: cannot create the output folder: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".apex-write-probe-*")
	if err != nil {
		return fmt.Errorf("-out %s: the output folder is not writable: %w", dir, err)
	}
	name := f.Name()
	if err := errors.Join(f.Close(), os.Remove(name)); err != nil {
		return fmt.Errorf("-out %s: the output folder is not writable: %w", dir, err)
	}
	return nil
}

// The train command stops gracefully on these signals: SIGHUP too, so a
// closed terminal or a hang-up from a job manager still leaves the results
// and a checkpoint behind.
var gracefulSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// notifySignals subscribes c to sigs and returns the function that
// unsubscribes it; tests replace it to deliver signals of their own.
var notifySignals = func(c chan<- os.Signal, sigs ...os.Signal) (stop func()) {
	signal.Notify(c, sigs...)
	return func() { signal.Stop(c) }
}

// exitNow ends the process at once (a second signal); tests replace it.
var exitNow = os.Exit

// watchSignals returns a context that ends at the first of
// gracefulSignals (after first(signal) is called), a function that reports
// that signal (nil if none came), and the function that stops watching. A
// second signal calls second(signal), which says what is lost, then ends
// the process at once with exit status 128+signal.
func watchSignals(first, second func(os.Signal)) (ctx context.Context, got func() os.Signal, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	c := make(chan os.Signal, 2)
	unsubscribe := notifySignals(c, gracefulSignals...)
	quit := make(chan struct{})
	var mu sync.Mutex
	var firstSig os.Signal
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			var s os.Signal
			select {
			case s = <-c:
			case <-quit:
				return
			}
			mu.Lock()
			again := firstSig != nil
			if !again {
				firstSig = s
			}
			mu.Unlock()
			if !again {
				first(s)
				cancel()
				continue
			}
			second(s)
			exitNow(signalExitCode(s))
			return // only reached when a test replaced exitNow
		}
	})
	got = func() os.Signal {
		mu.Lock()
		defer mu.Unlock()
		return firstSig
	}
	stop = func() {
		unsubscribe()
		close(quit)
		wg.Wait()
		cancel()
	}
	return ctx, got, stop
}

// lastCheckpoint says which checkpoint file a run cut short can resume
// from: the file at path as it is on disk now.
func lastCheckpoint(path string) string {
	if path == "" {
		return "this run writes no checkpoint (-checkpoint=none)"
	}
	st, err := os.Stat(path)
	if err != nil {
		return "no checkpoint has been written yet (" + path + ")"
	}
	return fmt.Sprintf("the last periodic checkpoint is %s (saved %s, %s ago)", path,
		st.ModTime().UTC().Format(time.RFC3339), time.Since(st.ModTime()).Round(time.Second))
}

// signalName is a signal's conventional name (SIGINT, SIGTERM, SIGHUP).
func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return s.String()
}

// signalExitCode is the shell's exit status of a process a signal ended:
// 128 + the signal's number (SIGINT 130, SIGTERM 143, SIGHUP 129).
func signalExitCode(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 130
}

// trainProgress is what the progress records read: a Trainer, or a
// learner host of a distributed run.
type trainProgress interface {
	Stats() runtime.TrainStats
	Config() runtime.TrainConfig
}

// progress reports the run every period until done is closed: a log
// record (text or JSON) per period, or, on a terminal in text mode, one
// progress-bar line redrawn in place; and a warning when a periodic
// checkpoint failed (the run goes on without it). extra, if not nil, adds
// attributes to each record (apex learner's shard counts).
func progress(tr trainProgress, log *slog.Logger, bar io.Writer, period time.Duration, done <-chan struct{}, extra func() []any) {
	if period <= 0 {
		return
	}
	if bar != nil {
		period = min(period, time.Second)
	}
	t := time.NewTicker(period)
	defer t.Stop()
	last := tr.Stats()               // rates over the first period, not since an earlier segment
	reported := runtime.TrainStats{} // the stats whose evaluation the records last showed
	for {
		select {
		case <-done:
			if bar != nil {
				fmt.Fprintln(bar)
			}
			return
		case <-t.C:
		}
		st := tr.Stats()
		dt := st.SegmentSeconds - last.SegmentSeconds
		envRate := float64(st.EnvSteps-last.EnvSteps) / dt
		updRate := float64(st.LearnerSteps-last.LearnerSteps) / dt
		if ck := st.Checkpoints; ck.Failed > last.Checkpoints.Failed { // the run goes on; say so now, not at the end
			if bar != nil {
				fmt.Fprintln(bar)
			}
			log.Warn("checkpoint failed", "checkpoint", tr.Config().Checkpoint, "failures", ck.Failed, "error", ck.LastError)
		}
		last = st
		if bar != nil {
			fmt.Fprint(bar, "\r"+progressBar(tr.Config(), st, envRate, updRate))
			continue
		}
		attrs := []any{"elapsed_s", round1(st.SegmentSeconds), "env_steps", st.EnvSteps, "env_steps_per_s", round1(envRate),
			"learner_steps", st.LearnerSteps, "updates_per_s", round1(updRate), "buffer", st.BufferSize}
		if tr.Config().Checkpoint != "" {
			attrs = append(attrs, "checkpoints", st.Checkpoints.Saved)
		}
		if newEval(reported, st) {
			attrs = append(attrs, "eval_return", round1(st.LastEval))
			reported = st
		}
		if d := tr.Config().Duration; d > 0 {
			attrs = append(attrs, "remaining_s", round1(max(0, d.Seconds()-st.SegmentSeconds)))
		}
		if extra != nil {
			attrs = append(attrs, extra()...)
		}
		log.Info("progress", attrs...)
	}
}

// newEval reports whether st holds an evaluation that the progress
// records have not shown yet (reported holds the stats of the last one
// they showed): a record carries eval_return only after a new evaluation,
// so it never presents an old one as current.
func newEval(reported, st runtime.TrainStats) bool {
	return st.Evaluations > reported.Evaluations
}

// progressBar is one terminal line: elapsed against the budget (steps or
// duration), rates, and the last evaluation's mean return (the bar is a
// status line: it keeps showing the last evaluation until the next).
func progressBar(cfg runtime.TrainConfig, st runtime.TrainStats, envRate, updRate float64) string {
	frac := 0.0
	if cfg.Duration > 0 {
		frac = st.SegmentSeconds / cfg.Duration.Seconds()
	}
	if cfg.Steps > 0 {
		frac = max(frac, float64(st.LearnerSteps)/float64(cfg.Steps))
	}
	frac = min(max(frac, 0), 1)
	const width = 24
	n := int(frac * width)
	eval := "-"
	if st.Evaluated {
		eval = fmt.Sprintf("%.1f", st.LastEval)
	}
	return fmt.Sprintf("[%s%s] %3.0f%% %5.0fs  env %.0f/s  updates %.0f/s  eval %s   ",
		strings.Repeat("=", n), strings.Repeat(" ", width-n), 100*frac, st.SegmentSeconds, envRate, updRate, eval)
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// writeResults writes results.json and curve.png into dir.
func writeResults(dir string, res *runtime.TrainResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("apex: %s, %d actors, %s replay", res.Config.Env, res.Config.Actors, res.Config.Sampler)
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "greedy evaluation return"
	xy := make(plotter.XYs, len(res.Curve))
	for i, c := range res.Curve {
		xy[i] = plotter.XY{X: c.Seconds, Y: c.MeanReturn}
	}
	if len(xy) > 0 {
		line, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		p.Add(line, pts)
	}
	return p.Save(7*vg.Inch, 4*vg.Inch, filepath.Join(dir, "curve.png"))
}

// insertersFlag is -inserters: a count, or "direct" (runtime.Direct).
type insertersFlag int

func (f *insertersFlag) String() string {
	if f != nil && int(*f) == runtime.Direct {
		return "direct"
	}
	if f == nil {
		return "0"
	}
	return strconv.Itoa(int(*f))
}

func (f *insertersFlag) Set(s string) error {
	if s == "direct" {
		*f = insertersFlag(runtime.Direct)
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > runtime.MaxInserters {
		return fmt.Errorf("want a count in [0, %d] or \"direct\", got %q", runtime.MaxInserters, s)
	}
	*f = insertersFlag(n)
	return nil
}

// methodOptionFlags holds the values of the replay methods' option flags
// (sampler.Options: -ter-eta, -lap-k, ...), one flag per option of every
// registered method, each parsed as its kind (a count as an int).
type methodOptionFlags struct {
	floats map[string]*float64
	ints   map[string]*int
}

// methodFlags defines on fs a flag for every registered method option,
// with the option's usage. An option named like one of fs's flags is an
// error naming both (a registered method's option must not shadow a flag
// of the command).
func methodFlags(fs *flag.FlagSet) (methodOptionFlags, error) {
	m := methodOptionFlags{floats: map[string]*float64{}, ints: map[string]*int{}}
	for _, o := range sampler.Options() {
		if fs.Lookup(o.Name) != nil {
			return m, fmt.Errorf("the replay method option -%s (of %s) has the name of a flag of %s: register it under another name",
				o.Name, strings.Join(sampler.OptionMethods(o.Name), ", "), fs.Name())
		}
		if o.Int {
			m.ints[o.Name] = fs.Int(o.Name, 0, o.Usage)
		} else {
			m.floats[o.Name] = fs.Float64(o.Name, 0, o.Usage)
		}
	}
	return m, nil
}

// values are the options whose flags were set to a non-zero value (0
// selects the method's default), nil if none.
func (m methodOptionFlags) values(set map[string]bool) map[string]float64 {
	var out map[string]float64
	put := func(name string, v float64) {
		if set[name] && v != 0 {
			if out == nil {
				out = map[string]float64{}
			}
			out[name] = v
		}
	}
	for name, p := range m.floats {
		put(name, *p)
	}
	for name, p := range m.ints {
		put(name, float64(*p))
	}
	return out
}

// methodKinds sorts the registered methods for the -loss and -no-is help:
// those that take the learner's loss, those that derive their own, and
// those with importance weights.
func methodKinds() (learnerLoss, ownLoss, weighted []string) {
	for _, s := range sampler.Specs() {
		if s.OwnLoss == nil {
			learnerLoss = append(learnerLoss, s.Name)
		} else {
			ownLoss = append(ownLoss, s.Name)
		}
		if s.ImportanceWeights {
			weighted = append(weighted, s.Name)
		}
	}
	return learnerLoss, ownLoss, weighted
}
