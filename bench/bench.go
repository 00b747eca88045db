// Package bench is apex's replay load test (the harness behind `apex bench`)
// and the mutex baseline it is compared against.
//
// A run drives the same load through two backends, one after the other in
// one process: the apex buffer (package buffer) and Baseline, a binary sum
// tree under one sync.Mutex ("what a Go user writes today", performance.md
// §3). The load is Config.Actors actor goroutines that fill batches of
// Config.Batch CartPole-sized transitions (44 bytes: 4+4 float32
// observations, a discrete action, reward, discount) and send them over a
// bounded channel to Config.Inserters inserter goroutines that call Insert,
// while one learner goroutine loops over steps of Sample(LearnerBatch) +
// UpdatePriorities(LearnerBatch), writing back random |δ|-like priorities
// so the tree keeps changing. The baseline gets the same actors, each
// inserting under the baseline's mutex itself (Config.BaselineInserters 0,
// what a Go user writes with a lock-protected buffer: the contention run of
// performance.md §3), and then, for a like-for-like comparison of the data
// structures, apex's own insert path (Config.BaselineSamePath). Before the load, each backend is filled to
// capacity, and (with Config.Solo) the learner runs alone for a while so the
// report can say how much of its solo rate it keeps under load.
//
// # Memory and goroutines
//
// Every batch an actor can fill is allocated before timing and recycled
// through a free list, both channels are bounded, and step latencies go to
// a fixed-size histogram, so a run's memory does not grow with its
// duration; the steady state allocates nothing. Every goroutine belongs to
// an errgroup and ends when its phase's context ends.
//
// The core never imports this package.
package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/apexrl/apex/buffer"
)

// Defaults of Config (DefaultConfig).
const (
	DefaultActors       = 64
	DefaultBatch        = 32
	DefaultLearnerBatch = 256
	DefaultCapacity     = 1 << 20
	DefaultInserters    = 1
	DefaultQueue        = 64
	DefaultDuration     = 10 * time.Second
	DefaultSeed         = 1
)

// MaxCapacity is the largest Config.Capacity accepted: 2^26 slots (about
// 4 GiB for both backends together), so a mistyped flag cannot exhaust the
// machine.
const MaxCapacity = 1 << 26

// ObsDim is the observation width of the benchmark's transitions
// (CartPole).
const ObsDim = 4

// Config describes one run. Start from DefaultConfig; Run validates.
type Config struct {
	// Actors is the number of actor goroutines (>= 1).
	Actors int
	// Batch is the number of transitions an actor sends at once (>= 1).
	Batch int
	// LearnerBatch is the number of items sampled, and of priorities
	// written back, per learner step (1..Capacity).
	LearnerBatch int
	// Capacity is the number of slots of each backend (1..MaxCapacity).
	Capacity int
	// Stripes is the apex buffer's stripe count: 0 for buffer's default,
	// else a power of two <= Capacity.
	Stripes int
	// Inserters is the number of goroutines that receive the actors'
	// batches from the bounded channel and insert them into the apex buffer.
	// 0 removes the channel: each actor then inserts its own batches
	// directly.
	Inserters int
	// BaselineInserters is the same for the mutex baseline. The default, 0,
	// has every actor call the baseline's Insert itself under its mutex:
	// what a Go user writes today with a lock-protected buffer, and the
	// contention run of the design notes (performance.md §3) that the
	// issue's 20x target refers to.
	BaselineInserters int
	// BaselineSamePath also runs the baseline through apex's insert path
	// (Inserters), so the two data structures are compared under one
	// topology too (Report.BaselineSamePath).
	BaselineSamePath bool
	// Queue is the capacity of the actors' channel, in batches (>= 1).
	Queue int
	// Duration is how long each timed phase (the load, and the solo run
	// unless SoloDuration is set) lasts (> 0).
	Duration time.Duration
	// SoloDuration is how long the learner runs alone per backend; 0 means
	// Duration.
	SoloDuration time.Duration
	// Seed seeds the learner's sampling and the priorities it writes back.
	Seed uint64
	// Baseline also runs the mutex baseline (false skips it).
	Baseline bool
	// Solo also measures each backend's learner alone (false skips it).
	Solo bool
	// NoiseDuration is how long the machine-noise probe runs after the
	// apex phases (Report.Noise); 0 means min(Duration, 2 s), negative
	// skips it.
	NoiseDuration time.Duration
	// Progress, if set, is called on Run's goroutine as each phase starts
	// (a fill, a solo or load phase of a backend, the noise probe) with a
	// line saying what it does and for how long.
	Progress func(line string)
}

// say reports a phase's start to c.Progress, if set.
func (c Config) say(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(fmt.Sprintf(format, args...))
	}
}

// Estimate is about how long Run takes with c, fills excluded: every timed
// phase (solo, load, noise) of every backend c runs.
func (c Config) Estimate() time.Duration {
	per := c.Duration
	if c.Solo {
		per += c.soloDuration()
	}
	d := per
	if nd := c.noiseDuration(); nd > 0 {
		d += nd
	}
	if c.Baseline {
		d += per
		if c.BaselineSamePath && c.BaselineInserters != c.Inserters {
			d += c.Duration
		}
	}
	return d
}

// DefaultConfig is the configuration `apex bench` runs with no flags.
func DefaultConfig() Config {
	return Config{
		Actors:       DefaultActors,
		Batch:        DefaultBatch,
		LearnerBatch: DefaultLearnerBatch,
		Capacity:     DefaultCapacity,
		Inserters:    DefaultInserters,
		Queue:        DefaultQueue,
		Duration:     DefaultDuration,
		Seed:         DefaultSeed,
		Baseline:     true,
		Solo:         true,
		// BaselineInserters 0: actors lock the baseline directly.
		BaselineSamePath: true,
	}
}

// Validate reports the first field out of range, naming it and its value.
func (c Config) Validate() error {
	switch {
	case c.Actors < 1:
		return fmt.Errorf("actors must be >= 1, got %d", c.Actors)
	case c.Batch < 1:
		return fmt.Errorf("batch must be >= 1, got %d", c.Batch)
	case c.Capacity < 1 || c.Capacity > MaxCapacity:
		return fmt.Errorf("capacity must be in [1, %d], got %d", MaxCapacity, c.Capacity)
	case c.Batch > c.Capacity:
		return fmt.Errorf("batch must not exceed capacity (%d), got %d", c.Capacity, c.Batch)
	case c.LearnerBatch < 1 || c.LearnerBatch > c.Capacity:
		return fmt.Errorf("learner-batch must be in [1, capacity=%d], got %d", c.Capacity, c.LearnerBatch)
	case c.Stripes < 0 || c.Stripes&(c.Stripes-1) != 0 || c.Stripes > c.Capacity:
		return fmt.Errorf("stripes must be 0 or a power of two <= capacity (%d), got %d", c.Capacity, c.Stripes)
	case c.Inserters < 0:
		return fmt.Errorf("inserters must be >= 0, got %d", c.Inserters)
	case c.BaselineInserters < 0:
		return fmt.Errorf("baseline-inserters must be >= 0, got %d", c.BaselineInserters)
	case c.Queue < 1:
		return fmt.Errorf("queue must be >= 1, got %d", c.Queue)
	case c.Duration <= 0:
		return fmt.Errorf("duration must be positive, got %v", c.Duration)
	case c.SoloDuration < 0:
		return fmt.Errorf("solo-duration must not be negative, got %v", c.SoloDuration)
	}
	return c.apexConfig().Validate()
}

// apexConfig is the buffer configuration of the apex backend.
func (c Config) apexConfig() buffer.Config {
	return buffer.Config{
		Capacity:   c.Capacity,
		Stripes:    c.Stripes,
		ObsDim:     ObsDim,
		Action:     buffer.Discrete,
		NumActions: 2,
	}
}

func (c Config) noiseDuration() time.Duration {
	if c.NoiseDuration != 0 {
		return c.NoiseDuration
	}
	return min(c.Duration, 2*time.Second)
}

func (c Config) soloDuration() time.Duration {
	if c.SoloDuration > 0 {
		return c.SoloDuration
	}
	return c.Duration
}

// Result holds one backend's figures. Rates are per second of the phase's
// wall time; latencies are of one learner step (Sample + UpdatePriorities
// of LearnerBatch items) in microseconds, from a histogram with 1.6%
// resolution (the maximum is exact).
type Result struct {
	// Backend names the backend: "apex" or "mutex-baseline".
	Backend string `json:"backend"`
	// InsertPath describes how the actors' transitions reached it.
	InsertPath string `json:"insert_path"`
	// Stripes is the apex buffer's stripe count (0 for the baseline).
	Stripes int `json:"stripes,omitempty"`
	// GenerationsTracked says whether write-backs to overwritten slots are
	// detected and dropped (apex) or applied to the new occupant (baseline).
	GenerationsTracked bool `json:"generations_tracked"`

	// DurationSec is the wall time of the load phase.
	DurationSec   float64 `json:"duration_sec"`
	InsertsPerSec float64 `json:"inserts_per_sec"`
	// SamplesPerSec is sampled transitions per second.
	SamplesPerSec float64 `json:"samples_per_sec"`
	// UpdatesPerSec is priority write-backs applied per second.
	UpdatesPerSec      float64 `json:"updates_per_sec"`
	LearnerStepsPerSec float64 `json:"learner_steps_per_sec"`
	LearnerSteps       uint64  `json:"learner_steps"`
	// FailedLearnerSteps counts learner steps (solo and load) whose Sample
	// gave up with buffer.ErrRetries (every draw kept meeting slots being
	// overwritten); they are timed but not counted as samples. Only tiny
	// buffers under heavy insert load can see them.
	FailedLearnerSteps uint64  `json:"failed_learner_steps"`
	LearnerStepP50US   float64 `json:"learner_step_p50_us"`
	LearnerStepP99US   float64 `json:"learner_step_p99_us"`
	LearnerStepP999US  float64 `json:"learner_step_p999_us"`
	LearnerStepMaxUS   float64 `json:"learner_step_max_us"`
	// StaleUpdatesDropped counts write-backs dropped during the load
	// because their slot had been overwritten since it was sampled (always
	// 0 for the baseline, which does not track generations).
	StaleUpdatesDropped uint64 `json:"stale_updates_dropped"`
	// TornReads counts sampled items re-drawn because they were being
	// overwritten while copied (apex only).
	TornReads uint64 `json:"torn_reads"`
	// StratumFallbacks counts sampled rows drawn over the whole mass
	// instead of their stratum because the stratum kept meeting slots being
	// written (apex only; buffer.Stats.StratumFallbacks).
	StratumFallbacks uint64 `json:"stratum_fallbacks"`
	// CPUCores is the process's CPU time during the load over its wall time
	// (0 where the platform does not report it).
	CPUCores float64 `json:"cpu_cores"`
	// Mallocs and GCCycles count heap allocations and garbage collections
	// during the load (the steady state should make none).
	Mallocs  uint64 `json:"mallocs"`
	GCCycles uint32 `json:"gc_cycles"`

	// Solo figures: the learner alone (no actors) on the same full buffer.
	// Absent when Config.Solo is false.
	SoloDurationSec       float64 `json:"solo_duration_sec,omitempty"`
	SoloSamplesPerSec     float64 `json:"solo_samples_per_sec,omitempty"`
	SoloLearnerStepP50US  float64 `json:"solo_learner_step_p50_us,omitempty"`
	SoloLearnerStepP99US  float64 `json:"solo_learner_step_p99_us,omitempty"`
	SoloLearnerStepP999US float64 `json:"solo_learner_step_p999_us,omitempty"`
	SoloLearnerStepMaxUS  float64 `json:"solo_learner_step_max_us,omitempty"`
	// LoadToSolo is SamplesPerSec / SoloSamplesPerSec: the share of its
	// solo rate the learner keeps under load.
	LoadToSolo float64 `json:"load_to_solo,omitempty"`
}

// Target is one of the goals for the apex figures, checked against
// this run.
type Target struct {
	Name  string  `json:"name"`
	Want  string  `json:"want"`
	Value float64 `json:"value"`
	Met   bool    `json:"met"`
}

// Report is the outcome of Run. The apex figures sit at the top level; the
// baseline's, with the same fields, under Baseline.
type Report struct {
	Result
	// Baseline is the mutex baseline under the same actor load, its
	// transitions delivered as Config.BaselineInserters says (by default
	// each actor inserts under the mutex itself); nil when Config.Baseline
	// is false.
	Baseline *Result `json:"baseline,omitempty"`
	// BaselineSamePath is the mutex baseline under apex's own insert path
	// (Config.Inserters), when Config.BaselineSamePath is set and the paths
	// differ. Its solo figures are Baseline's (the learner alone does not
	// depend on the insert path).
	BaselineSamePath *Result `json:"baseline_same_path,omitempty"`
	// ApexToBaseline is apex's learner rate (sampled transitions/s) over
	// the baseline's, both under load.
	ApexToBaseline float64 `json:"apex_to_baseline,omitempty"`
	// ApexToBaselineSamePath is apex's learner rate over
	// BaselineSamePath's: the data structures compared under one topology.
	ApexToBaselineSamePath float64 `json:"apex_to_baseline_same_path,omitempty"`
	// ApexToBaselineSolo is the same ratio with the learners alone.
	ApexToBaselineSolo float64 `json:"apex_to_baseline_solo,omitempty"`
	// Targets are the goals and whether this run met them.
	Targets []Target `json:"targets"`
	// Noise is the machine's own jitter for a loop as long as apex's
	// median learner step (see Noise); nil when Config.NoiseDuration is
	// negative.
	Noise *Noise `json:"machine_noise,omitempty"`
	// Interrupted says the run was cut short (its context ended): the
	// report holds the figures measured so far, those of the phase cut
	// short over the time it ran, and no targets; the phases that never
	// ran are absent or zero.
	Interrupted bool `json:"interrupted,omitempty"`

	// InsertPath describes how transitions reach the apex buffer.
	InsertPath string `json:"insert_path"`
	// Flags are the command-line flags of the run, set by the caller.
	Flags      map[string]string `json:"flags,omitempty"`
	Config     ConfigJSON        `json:"config"`
	GOMAXPROCS int               `json:"gomaxprocs"`
	NumCPU     int               `json:"num_cpu"`
	GoVersion  string            `json:"go_version"`
	GOOS       string            `json:"goos"`
	GOARCH     string            `json:"goarch"`
	// TransitionBytes is the payload of one transition (44).
	TransitionBytes int `json:"transition_bytes"`
}

// ConfigJSON is Config as reported, durations in seconds.
type ConfigJSON struct {
	Actors            int     `json:"actors"`
	Batch             int     `json:"batch"`
	LearnerBatch      int     `json:"learner_batch"`
	Capacity          int     `json:"capacity"`
	Stripes           int     `json:"stripes"`
	Inserters         int     `json:"inserters"`
	BaselineInserters int     `json:"baseline_inserters"`
	BaselineSamePath  bool    `json:"baseline_same_path"`
	Queue             int     `json:"queue"`
	DurationSec       float64 `json:"duration_sec"`
	SoloDurationSec   float64 `json:"solo_duration_sec"`
	NoiseDurationSec  float64 `json:"noise_duration_sec"`
	Seed              uint64  `json:"seed"`
	Baseline          bool    `json:"baseline"`
	Solo              bool    `json:"solo"`
}

// Run validates cfg, then measures the apex buffer and (unless
// cfg.Baseline is false) the mutex baseline under the same load, each
// preceded by its solo learner run (unless cfg.Solo is false). It takes
// about 2·(Duration + SoloDuration) + Duration (the baseline's second
// insert path) plus the fills (Config.Estimate). Cancelling ctx stops the
// run early: Run then returns ctx's error together with a report of the
// figures measured so far (Report.Interrupted). Run starts goroutines and
// waits for all of them before it returns.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{
		InsertPath:      insertPath(cfg, cfg.Inserters),
		Config:          configJSON(cfg),
		GOMAXPROCS:      runtime.GOMAXPROCS(0),
		NumCPU:          runtime.NumCPU(),
		GoVersion:       runtime.Version(),
		GOOS:            runtime.GOOS,
		GOARCH:          runtime.GOARCH,
		TransitionBytes: transitionBytes,
	}
	// stopped returns the report so far when ctx has ended, else the error.
	stopped := func(err error) (*Report, error) {
		if cerr := ctx.Err(); cerr != nil {
			rep.Interrupted = true
			return rep, cerr
		}
		return nil, err
	}
	tab := newPrioTable(cfg.Seed, cfg.LearnerBatch)

	ab, err := newApexBackend(cfg)
	if err != nil {
		return nil, err
	}
	res, err := measure(ctx, "apex", ab, cfg, tab)
	res.InsertPath = insertPath(cfg, cfg.Inserters)
	rep.Result = res
	if err != nil {
		if rep, err := stopped(err); rep != nil {
			return rep, err
		}
		return nil, fmt.Errorf("apex: %w", err)
	}
	ab = nil
	runtime.GC() // release the apex buffer before the baseline's is built
	if nd := cfg.noiseDuration(); nd > 0 {
		loop := res.SoloLearnerStepP50US
		if loop == 0 {
			loop = res.LearnerStepP50US
		}
		if loop > 0 {
			cfg.say("machine noise: a CPU-only loop of %.1f µs, timed for %v", loop, nd)
			n := measureNoise(ctx, loop, nd)
			rep.Noise = &n
		}
	}
	if ctx.Err() != nil {
		return stopped(nil)
	}

	if cfg.Baseline {
		bcfg := cfg
		bcfg.Inserters = cfg.BaselineInserters
		bb := newBaselineBackend(bcfg)
		res, err := measure(ctx, "mutex baseline", bb, bcfg, tab)
		res.InsertPath = insertPath(cfg, cfg.BaselineInserters)
		rep.Baseline = &res
		rep.ApexToBaseline = ratio(rep.SamplesPerSec, res.SamplesPerSec)
		rep.ApexToBaselineSolo = ratio(rep.SoloSamplesPerSec, res.SoloSamplesPerSec)
		if err != nil {
			if rep, err := stopped(err); rep != nil {
				return rep, err
			}
			return nil, fmt.Errorf("baseline: %w", err)
		}
		bb = nil
		runtime.GC()
		if cfg.BaselineSamePath && cfg.BaselineInserters != cfg.Inserters {
			scfg := cfg
			scfg.Solo = false
			sb := newBaselineBackend(scfg)
			same, err := measure(ctx, "mutex baseline on apex's insert path", sb, scfg, tab)
			same.InsertPath = insertPath(cfg, cfg.Inserters)
			same.SoloDurationSec, same.SoloSamplesPerSec = res.SoloDurationSec, res.SoloSamplesPerSec
			same.SoloLearnerStepP50US, same.SoloLearnerStepP99US = res.SoloLearnerStepP50US, res.SoloLearnerStepP99US
			same.SoloLearnerStepP999US, same.SoloLearnerStepMaxUS = res.SoloLearnerStepP999US, res.SoloLearnerStepMaxUS
			same.LoadToSolo = ratio(same.SamplesPerSec, same.SoloSamplesPerSec)
			rep.BaselineSamePath = &same
			rep.ApexToBaselineSamePath = ratio(rep.SamplesPerSec, same.SamplesPerSec)
			if err != nil {
				if rep, err := stopped(err); rep != nil {
					return rep, err
				}
				return nil, fmt.Errorf("baseline (apex's insert path): %w", err)
			}
			sb = nil
			runtime.GC()
		}
	}
	rep.Targets = targets(rep)
	return rep, nil
}

func ratio(a, b float64) float64 {
	if b == 0 || a == 0 {
		return 0
	}
	return a / b
}

// infoTarget marks a Target that is reported for context, not a goal.
const infoTarget = "info"

// targets checks the goals for the apex figures.
func targets(r *Report) []Target {
	t := []Target{
		{Name: "learner_step_p99_us", Want: "< 100", Value: r.LearnerStepP99US, Met: r.LearnerStepP99US < 100},
		{Name: "learner_step_p999_us", Want: "< 250", Value: r.LearnerStepP999US, Met: r.LearnerStepP999US < 250},
		{Name: "inserts_per_sec", Want: "> 10e6", Value: r.InsertsPerSec, Met: r.InsertsPerSec > 10e6},
	}
	if r.LoadToSolo > 0 {
		t = append([]Target{{Name: "load_to_solo", Want: ">= 0.5", Value: r.LoadToSolo, Met: r.LoadToSolo >= 0.5}}, t...)
	}
	if r.ApexToBaseline > 0 {
		t = append(t, Target{Name: "apex_to_baseline", Want: ">= 20", Value: r.ApexToBaseline, Met: r.ApexToBaseline >= 20})
	}
	if r.Noise != nil && r.Noise.P50US > 0 { // reported, not a target of the issue
		t = append(t, Target{Name: "machine_noise_p99_over_p50", Want: infoTarget, Value: r.Noise.P99US / r.Noise.P50US, Met: true})
	}
	if r.ApexToBaselineSamePath > 0 { // reported, not a target of the issue
		t = append(t, Target{Name: "apex_to_baseline_same_path", Want: infoTarget, Value: r.ApexToBaselineSamePath, Met: true})
	}
	return t
}

func insertPath(cfg Config, inserters int) string {
	if inserters == 0 {
		return fmt.Sprintf("%d actors call Insert directly with batches of %d", cfg.Actors, cfg.Batch)
	}
	return fmt.Sprintf("%d actors -> bounded channel (%d batches of %d) -> %d inserter goroutine(s), one Insert per batch",
		cfg.Actors, cfg.Queue, cfg.Batch, inserters)
}

func configJSON(c Config) ConfigJSON {
	return ConfigJSON{
		Actors: c.Actors, Batch: c.Batch, LearnerBatch: c.LearnerBatch, Capacity: c.Capacity,
		Stripes: c.Stripes, Inserters: c.Inserters, BaselineInserters: c.BaselineInserters,
		BaselineSamePath: c.BaselineSamePath, Queue: c.Queue,
		DurationSec: c.Duration.Seconds(), SoloDurationSec: c.soloDuration().Seconds(), NoiseDurationSec: max(0, c.noiseDuration().Seconds()),
		Seed: c.Seed, Baseline: c.Baseline, Solo: c.Solo,
	}
}

// prioTable holds precomputed |δ|-like priorities, (|N(0,1)| + 0.01)^0.6
// (PER's proportional priority with α = 0.6), so the learner's write-backs
// cost no random-number generation in the timed step: a step writes back
// a window of n values at a random offset.
type prioTable struct {
	v []float64
	n int // window length (the learner batch)
}

const prioTableSize = 1 << 16

func newPrioTable(seed uint64, n int) *prioTable {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	v := make([]float64, prioTableSize+n)
	for i := range v {
		v[i] = math.Pow(math.Abs(rng.NormFloat64())+0.01, 0.6)
	}
	return &prioTable{v: v, n: n}
}

// window returns n priorities starting at a random offset.
func (t *prioTable) window(rng *rand.Rand) []float64 {
	off := rng.IntN(prioTableSize)
	return t.v[off : off+t.n]
}

// fillPrefill copies the table's values from offset off (cyclically) into
// dst and returns the next offset.
func (t *prioTable) fillPrefill(dst []float64, off int) int {
	for i := range dst {
		dst[i] = t.v[off]
		if off++; off == prioTableSize {
			off = 0
		}
	}
	return off
}
