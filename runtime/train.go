package runtime

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/apexrl/apex/actor"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/learner"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// TrainConfig is one Ape-X training run. The zero value of a field selects
// the default noted on it (see DefaultTrainConfig).
type TrainConfig struct {
	Env     string `json:"env"`     // registered environment (envs.Names); "CartPole-v1"
	Actors  int    `json:"actors"`  // actor goroutines; 64
	Sampler string `json:"sampler"` // replay method (sampler.Methods()); "per"
	// Algo is the learner: "dqn" (Double DQN, discrete actions), "td3"
	// (continuous actions; with a ReF-ER Sampler, TD3 with ReF-ER: the
	// actors' fixed-std Gaussian behaviour is stored and no uniform
	// warm-up is taken unless RandomSteps asks), "sac" (continuous
	// actions, Soft Actor-Critic with automatic entropy tuning; any Sampler
	// but the ReF-ER ones) or "vracer" (a ReF-ER Sampler); empty picks dqn
	// for discrete actions, vracer under a ReF-ER Sampler, td3 otherwise.
	Algo string `json:"algo"`
	// Steps stops the run after this many learner steps; Duration after
	// this much wall time; whichever comes first (at least one is needed).
	Steps    int64         `json:"steps"`
	Duration time.Duration `json:"duration_ns"`
	// TargetReturn, if non-zero, stops the run once it is solved: a
	// periodic evaluation reaches TargetReturn and a confirming evaluation of
	// FinalEpisodes episodes of the same parameters does too (that
	// evaluation is then the final result). StopWhenSolved with TargetReturn
	// 0 takes the environment's published threshold (SolvedReturn).
	TargetReturn   float64 `json:"target_return"`
	StopWhenSolved bool    `json:"stop_when_solved"`
	Seed           uint64  `json:"seed"`

	Batch int     `json:"batch"`  // learner batch; learner's default (dqn 64, td3 256)
	LR    float64 `json:"lr"`     // Adam learning rate (td3: actor and critics); learner's default (dqn 1e-3, td3 3e-4)
	NStep int     `json:"n_step"` // dqn 3 (Ape-X), td3 1 (TD3)
	Gamma float64 `json:"gamma"`  // 0.99
	// ReplayRatio is the sampled items per inserted item the rate limiter
	// keeps: dqn 4; td3 the batch size, one learner step per environment
	// step as in TD3.
	ReplayRatio float64 `json:"replay_ratio"`
	Capacity    int     `json:"capacity"` // replay capacity; 100000
	Hidden      []int   `json:"hidden"`   // hidden widths; [64 64] (td3: each of the policy and the critics)
	Dueling     bool    `json:"dueling"`
	// Float32 runs the learner's math on the float32 SIMD kernels of
	// model/internal/f32: every network the learner updates and its
	// targets are built with model.Config.Float32 (the same initial
	// parameters as without it), and the learner's Adam follows them.
	// Batch forwards, backwards and Adam steps are several times faster
	// (bench/BENCHMARKS.md), at float32 precision: the parameters are
	// float32 values after every step, and results agree with the float64
	// run to about 1e-6 relative per operation, not bit for bit. The
	// actors' networks stay float64 (one row runs on the float64 layers
	// either way). DefaultTrainConfig (and so apex train) sets it: the
	// experiments' acceptance checks pass with it and CartPole's default
	// run solves faster. Unlike most fields its zero value is not replaced
	// by a default: false is the float64 learner, what a TrainConfig
	// literal, and the JSON of a configuration saved before float32 became
	// the default (no "float32" key), mean. A resume may change it: the
	// learner's float64 master parameters and Adam's moments carry over
	// (ResumeTrainer, Trainer.Warnings).
	Float32 bool `json:"float32"`
	// LearnerWorkers is W, the goroutines a learner step's batch is split
	// over (data parallel: each of W row shards computes its rows'
	// gradient, then one reduction in shard order and one Adam step; see
	// learner.Workers). 0 selects 1, the serial step: on the 2-core
	// machine the actors and the inserter already use the second core,
	// and W > 1 changes the step's float sums (not bit-identical to W =
	// 1, though the same W gives the same bits, -deterministic included).
	// More than the batch is clamped by the learner. The dqn, td3 and sac
	// learners have the sharded step (W > 1 is refused for vracer, and for
	// td3 under the refer method, whose ReF-ER step runs serially). Not
	// state: a resumed run may change it.
	LearnerWorkers int `json:"learner_workers,omitempty"`
	// Loss is the per-sample loss of the methods that take the learner's
	// (sampler.Spec.OwnLoss nil): "huber", "mse" or "l1"; empty means dqn
	// Huber(1), td3 and sac MSE. A method with its own loss (lap: Huber(k),
	// pal: PAL(k, alpha)) takes only a Loss of that kind.
	Loss string `json:"loss,omitempty"`
	// NoIS drops the importance weights of the methods that have them
	// (per, rank, ter, ners: sampler.Spec.ImportanceWeights). With an MSE loss
	// that pairing is biased (Fujimoto et al. 2020, Theorem 3); the run is
	// allowed and Trainer.Warnings says so.
	NoIS bool `json:"no_is,omitempty"`
	// MethodOptions are the replay method's numeric options by name
	// (sampler.Spec.Options; the command line's flag of each: "ter-eta"
	// for -ter-eta, "ners-interval", "lap-k", "refer-c", ...); an absent or
	// zero option selects the method's default. An option of another
	// method is refused (ForMethod drops them). Set them with WithOption
	// (or a map of the caller's): a TrainConfig copy shares the map, which
	// the runtime never modifies.
	MethodOptions map[string]float64 `json:"method_options,omitempty"`
	// Tau, when > 0, is the Polyak rate of the target networks (dqn: after
	// every step instead of hard copies; td3: default 0.005).
	Tau float64 `json:"tau,omitempty"`
	// Epsilon, when > 0, is every dqn actor's exploration rate instead of
	// Ape-X's per-actor schedule.
	Epsilon float64 `json:"epsilon,omitempty"`
	// EpsilonDecaySteps, when > 0, anneals every dqn actor's exploration
	// rate linearly from 1 to its rate over its first EpsilonDecaySteps
	// environment steps.
	EpsilonDecaySteps int64 `json:"epsilon_decay_steps,omitempty"`
	// Sigma is the td3 actors' Gaussian exploration noise in units of the
	// action half-range; 0 means 0.1, or 0.2 under a ReF-ER method (the
	// paper's DDPG arm).
	Sigma float64 `json:"sigma,omitempty"`
	// OUTheta, when > 0, makes td3's exploration noise an
	// Ornstein–Uhlenbeck process with this mean reversion (dt 0.01, reset
	// each episode; see actor.ContinuousConfig.OUTheta); 0 means
	// independent Gaussian noise.
	OUTheta float64 `json:"ou_theta,omitempty"`
	// RandomSteps is the number of uniformly random actions td3's actors
	// take first, shared among them (TD3's start_timesteps); 0 means
	// MinSizeToSample. Unused by dqn.
	RandomSteps int `json:"random_steps,omitempty"`
	// RefreshEvery is the number of environment steps between two reads of
	// the learner's latest parameters by each dqn, td3 or sac actor; 0
	// derives it so that the actors' policy lags the learner by about
	// refreshLag (400) learner steps: clamp(400·Batch/(ReplayRatio·Actors),
	// 1, 400). With one actor that is Ape-X's 400 environment steps; with
	// 64 actors, dqn's defaults give 100 and td3's and sac's (a learner
	// step per environment step) give 6. Ape-X's fixed 400 would make 64
	// td3 or sac actors replay the initial policy for a whole 20k-step run.
	// vracer's actors read every 20 steps unless it is set.
	RefreshEvery int `json:"refresh_every,omitempty"`
	// MinSizeToSample is the replay size before learning starts; 0 means
	// max(1000, Batch + actor.DefaultLocalBatch).
	MinSizeToSample int `json:"min_size_to_sample"`
	// EvalEvery is the time between periodic greedy evaluations (5 s) of
	// EvalEpisodes episodes (5); the final evaluation runs FinalEpisodes (20).
	EvalEvery     time.Duration `json:"eval_every_ns"`
	EvalEpisodes  int           `json:"eval_episodes"`
	FinalEpisodes int           `json:"final_episodes"`

	// Checkpoint, if set, is the file Run writes when it ends (also when it
	// ends with an error, for diagnosis): replay buffer, learner (networks,
	// optimizer, step, RNG) and counters; ResumeTrainer continues from it.
	Checkpoint string `json:"checkpoint"`
	// CheckpointEvery is the time between periodic checkpoints while Run
	// runs (each pauses the inserter and the learner for the save; actors
	// keep stepping into the bounded queue); 0 writes one only when the run
	// ends. Unlike most fields its zero value is not replaced by a default:
	// DefaultTrainConfig sets DefaultCheckpointEvery. Needs Checkpoint.
	CheckpointEvery time.Duration `json:"checkpoint_every_ns"`
	// Resumes counts how often the run was resumed (set by ResumeTrainer);
	// actors draw fresh episode seeds on each resume.
	Resumes uint64 `json:"resumes"`

	// Deterministic runs a single actor and the learner in lockstep on one
	// goroutine (insert a local batch, then learn while the rate limiter
	// admits samples) and evaluates every EvalEverySteps learner steps, so
	// the same seed and Steps give the same run, bit for bit. It needs
	// Actors = 1 and Steps > 0 (a Duration would cut the run at a
	// wall-clock moment).
	Deterministic  bool  `json:"deterministic"`
	EvalEverySteps int64 `json:"eval_every_steps"` // 1000

	// Inserters is the number of goroutines that move the actors' batches
	// from their bounded channel into the replay buffer: 0 means
	// DefaultInserters (1), Direct (−1) removes the channel and has each
	// actor insert its own batches (package doc, "Inserters", says why one
	// is the default). The deterministic mode inserts on its one goroutine
	// and refuses the setting.
	Inserters int `json:"inserters,omitempty"`
}

// DefaultCheckpointEvery is DefaultTrainConfig's CheckpointEvery: a run
// killed without warning (SIGKILL, the OOM killer) loses at most this much
// work.
const DefaultCheckpointEvery = time.Minute

// refreshLag is the learner steps the actors' parameters may lag behind
// by default (TrainConfig.RefreshEvery). Ape-X's actors lagged by about 55
// learner steps (400 frames at about 139 frames/s each, the learner at
// about 19 batches/s); 400 keeps every one-actor run at Ape-X's period.
const refreshLag = 400

// defaultMinSizeToSample is the smallest default MinSizeToSample.
const defaultMinSizeToSample = 1000

// DefaultBetaSteps is the importance-sampling annealing horizon of a run
// bounded only by Duration (about 40 s of learning on the 2-core machine).
const DefaultBetaSteps = 100_000

// SolvedReturn holds Gymnasium's published reward thresholds (the
// environments' spec.reward_threshold): the mean return at which a task
// counts as solved.
var SolvedReturn = map[string]float64{"CartPole-v1": 475, "Acrobot-v1": -100, "MountainCar-v0": -110, "MountainCarContinuous-v0": 90}

// DefaultTrainConfig is the configuration `apex` trains with by default,
// the float32 learner included (Float32; a TrainConfig literal's zero
// Float32 is the float64 learner).
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{Env: "CartPole-v1", Actors: 64, Sampler: sampler.DefaultMethod, Duration: 3 * time.Minute, StopWhenSolved: true,
		Gamma: 0.99, Capacity: 100_000, Hidden: []int{64, 64},
		EvalEvery: 5 * time.Second, EvalEpisodes: 5, FinalEpisodes: 20, CheckpointEvery: DefaultCheckpointEvery, Float32: true}
}

// ForMethod returns c with Sampler set to method and the MethodOptions
// the method does not take dropped (NewTrainer refuses a setting the run's
// method would ignore), in a map of its own. A sweep over methods can so
// share one base configuration that carries each method's options.
// O(options).
func (c TrainConfig) ForMethod(method string) TrainConfig {
	c.Sampler = method
	c.MethodOptions = maps.Clone(c.MethodOptions)
	for _, r := range methodSettings(&c) {
		if !r.ok {
			r.clear(&c)
		}
	}
	return c
}

// withDefaults fills zero fields; algo is the learner the run uses (the
// defaults of Batch, NStep, ReplayRatio, Loss and RandomSteps depend on
// it) and maxEpisode the environment's time limit (0: none).
func (c TrainConfig) withDefaults(algo string, maxEpisode int) TrainConfig {
	d := DefaultTrainConfig()
	c.Algo = algo
	orDefault(&c.Env, d.Env)
	orDefault(&c.Actors, d.Actors)
	orDefault(&c.Sampler, d.Sampler)
	spec, _ := sampler.Lookup(c.Sampler) // newTrainer checked it
	orDefault(&c.Gamma, d.Gamma)
	orDefault(&c.Capacity, d.Capacity)
	switch algo {
	case "vracer":
		orDefault(&c.Batch, learner.DefaultVRACERBatch)
		orDefault(&c.NStep, 1) // Retrace over whole episodes: the actors store single steps
		orDefault(&c.ReplayRatio, float64(c.Batch))
	case "sac":
		orDefault(&c.Batch, learner.DefaultSACBatch)
		orDefault(&c.NStep, 1)
		orDefault(&c.ReplayRatio, float64(c.Batch))
		if spec.OwnLoss == nil {
			orDefault(&c.Loss, "mse") // SAC's critic loss, as TD3's (a method with its own loss keeps it)
		}
	case "td3":
		orDefault(&c.Batch, learner.DefaultTD3Batch)
		orDefault(&c.NStep, 1)
		orDefault(&c.ReplayRatio, float64(c.Batch))
		if spec.OwnLoss == nil {
			orDefault(&c.Loss, "mse") // TD3's critic loss (a method with its own loss keeps it)
		}
	default:
		orDefault(&c.NStep, 3)
		orDefault(&c.ReplayRatio, 4)
	}
	if c.RefreshEvery == 0 && algo != "vracer" {
		batch := c.Batch
		orDefault(&batch, learner.DefaultBatch) // dqn's default is the learner's
		lag := refreshLag * float64(batch) / (c.ReplayRatio * float64(c.Actors))
		c.RefreshEvery = int(min(max(lag, 1), actor.DefaultRefreshEvery))
	}
	orDefault(&c.MinSizeToSample, max(defaultMinSizeToSample, c.Batch+actor.DefaultLocalBatch))
	orDefault(&c.EvalEvery, d.EvalEvery)
	orDefault(&c.EvalEpisodes, d.EvalEpisodes)
	orDefault(&c.FinalEpisodes, d.FinalEpisodes)
	orDefault(&c.EvalEverySteps, 1000)
	if (algo == "td3" && !spec.Needs.Behaviour) || algo == "sac" { // a behaviour the method replays through is the recorded Gaussian, every step of it
		orDefault(&c.RandomSteps, c.MinSizeToSample)
	}
	if algo == "td3" && spec.Needs.ExplorationSigma != 0 {
		orDefault(&c.Sigma, spec.Needs.ExplorationSigma) // ReF-ER's: the paper's DDPG arm (Alg. 4), π = m(s) + N(0, 0.2²)
	}
	if (algo == "vracer" || spec.Needs.FinishedEpisodes) && maxEpisode > 0 {
		// The method samples finished episodes only (V-RACER's do): learning
		// may start once every actor can have finished one, or a step finds
		// none.
		c.MinSizeToSample = max(c.MinSizeToSample, c.Actors*(maxEpisode+actor.DefaultLocalBatch)+c.Batch)
	}
	if c.Hidden == nil {
		c.Hidden = d.Hidden
	}
	if c.TargetReturn == 0 && c.StopWhenSolved {
		c.TargetReturn = SolvedReturn[c.Env] // 0 (never) when no threshold is published
	}
	return c
}

// orDefault sets *p to d when *p is the zero value.
func orDefault[T comparable](p *T, d T) {
	var zero T
	if *p == zero {
		*p = d
	}
}

// EvalPoint is one greedy evaluation during training.
type EvalPoint struct {
	Seconds      float64 `json:"seconds"`
	LearnerSteps int64   `json:"learner_steps"`
	EnvSteps     int64   `json:"env_steps"`
	MeanReturn   float64 `json:"mean_return"`
	// FarFraction and MeanKL are the ReF-ER stage's state when the
	// evaluation ran (LearnerStats; vracer, or td3 under a ReF-ER
	// method); 0 otherwise.
	FarFraction float64 `json:"far_fraction,omitempty"`
	MeanKL      float64 `json:"mean_kl,omitempty"`
	// Sampled is LearnerStats.Sampled when the evaluation ran: the sums of
	// |δ| and Q over every row sampled so far, so the difference of two
	// points gives the statistics of the rows sampled between them (NERS's
	// Table 3 "at 10,000 steps"); nil for learners that keep none.
	Sampled *learner.Moments `json:"sampled,omitempty"`
}

// Why a run stopped (TrainResult.StopReason).
const (
	// StopSolved: a periodic evaluation and its confirming final
	// evaluation reached TargetReturn.
	StopSolved = "solved"
	// StopSteps: the run took its Steps learner steps.
	StopSteps = "steps"
	// StopDuration: the run spent its Duration.
	StopDuration = "duration"
	// StopInterrupted: the context given to Run was cancelled (a signal,
	// or the embedder's own cancellation).
	StopInterrupted = "interrupted"
)

// TrainResult is what a run leaves behind.
type TrainResult struct {
	// Config is the effective configuration: every default filled in.
	Config TrainConfig `json:"config"`
	// StopReason says why the run stopped: StopSolved, StopSteps,
	// StopDuration or StopInterrupted.
	StopReason string `json:"stop_reason"`
	// Build and Machine say what ran the run, and where.
	Build           BuildInfo   `json:"build"`
	Machine         MachineInfo `json:"machine"`
	Seconds         float64     `json:"seconds"`
	LearnerSteps    int64       `json:"learner_steps"`
	EnvSteps        int64       `json:"env_steps"`
	EnvStepsPerSec  float64     `json:"env_steps_per_sec"`
	UpdatesPerSec   float64     `json:"updates_per_sec"`
	FinalReturn     float64     `json:"final_return"`
	FinalReturns    []float64   `json:"final_returns"`
	Curve           []EvalPoint `json:"curve"`
	StoppedByTarget bool        `json:"stopped_by_target"`
}

// TrainStats is a snapshot of a running Trainer, for progress and metrics.
type TrainStats struct {
	Seconds float64 // the whole run, earlier segments of a resumed run included
	// SegmentSeconds is the time since this Run started (Duration bounds it).
	SegmentSeconds float64
	EnvSteps       int64
	Episodes       int64
	LearnerSteps   int64
	BufferSize     int
	LastEval       float64 // NaN-free: 0 until the first evaluation
	Evaluated      bool
	// Evaluations counts this Run's evaluations (periodic and final): a
	// reader that keeps the last count it saw knows whether LastEval is new.
	Evaluations int64
	Learner     LearnerStats
	Buffer      buffer.Stats
	Pipeline    PipelineStats
	Limiter     RateLimiterStats
	Checkpoints CheckpointStats
}

// CheckpointStats counts the checkpoints a Run wrote periodically and at
// its end (SaveCheckpoint calls by the embedder are not counted).
type CheckpointStats struct {
	Saved  int64 // checkpoints written
	Failed int64 // checkpoints that could not be written (the run goes on)
	// LastSeconds is how long the last written checkpoint took (the
	// inserter and the learner wait that long); LastBytes its size.
	LastSeconds float64
	LastBytes   int64
	// LastError is the last failure's message; empty after a success.
	LastError string
}

// checkpointCounters is CheckpointStats as Run updates it.
type checkpointCounters struct {
	mu sync.Mutex
	st CheckpointStats
}

// Trainer runs one Ape-X training run: it owns every goroutine of it.
// It is assembled from the same parts a run split over processes is: a
// ReplayCore (buffer, method, limiter), a LearnerHost over the core's
// method (learner, store, evaluator, checkpointer, stop rules) and an
// ActorHost of cfg.Actors actors inserting into the core's buffer.
// Run may be called once; Stats, Policy, Config and SaveCheckpoint are safe
// for concurrent use with it.
type Trainer struct {
	cfg  TrainConfig
	core *ReplayCore
	lh   *LearnerHost
	ah   *ActorHost
	// The parts' pieces the Trainer uses directly.
	buf     *buffer.Buffer
	agent   agent
	actors  []actorSource
	store   *model.Store
	limiter *RateLimiter
	// limBase is the rate limiter's balance before this Trainer's first
	// operation (zero, or restored from a checkpoint): checkpoints state
	// the balance as limBase plus the pipeline's completed operations.
	limBase limiterState
	// notes are the run's own warnings beside the replay method's (a
	// resume's precision conversion), shown by Warnings.
	notes []string
}

// ErrRunOnce is returned by a second call of Trainer.Run (and of
// LearnerHost.Run or Tasks): a run runs once (ResumeTrainer continues a
// finished run from its checkpoint).
var ErrRunOnce = errors.New("runtime: train: Run was already called on this Trainer (resume from its checkpoint to continue)")

// errShape marks a restored replay buffer that does not fit the run.
var errShape = errors.New("the replay buffer does not fit the configuration")

// MaxActors bounds TrainConfig.Actors.
const MaxActors = 1 << 14

// checkConfig refuses settings no run can use, before anything is built:
// non-finite or negative numbers and absurd sizes, naming the field.
func checkConfig(c TrainConfig) error {
	for _, f := range []struct {
		name string
		v    float64
		neg  bool // may be negative
	}{{"TargetReturn", c.TargetReturn, true}, {"LR", c.LR, false}, {"Gamma", c.Gamma, false},
		{"ReplayRatio", c.ReplayRatio, false}, {"Tau", c.Tau, false},
		{"Epsilon", c.Epsilon, false}, {"Sigma", c.Sigma, false}, {"OUTheta", c.OUTheta, false}} {
		if !finite(f.v) {
			return fmt.Errorf("runtime: train: %s must be a finite number, got %v", fieldName(f.name), f.v)
		}
		if f.v < 0 && !f.neg {
			return fmt.Errorf("runtime: train: %s must not be negative, got %v", fieldName(f.name), f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"Actors", int64(c.Actors)}, {"Capacity", int64(c.Capacity)}, {"Batch", int64(c.Batch)},
		{"NStep", int64(c.NStep)}, {"MinSizeToSample", int64(c.MinSizeToSample)}, {"RandomSteps", int64(c.RandomSteps)},
		{"EvalEpisodes", int64(c.EvalEpisodes)}, {"FinalEpisodes", int64(c.FinalEpisodes)},
		{"EpsilonDecaySteps", c.EpsilonDecaySteps}, {"Steps", c.Steps}, {"EvalEverySteps", c.EvalEverySteps},
		{"RefreshEvery", int64(c.RefreshEvery)}} {
		if f.v < 0 {
			return fmt.Errorf("runtime: train: %s must not be negative, got %d", fieldName(f.name), f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Duration", c.Duration}, {"EvalEvery", c.EvalEvery}, {"CheckpointEvery", c.CheckpointEvery}} {
		if f.v < 0 {
			return fmt.Errorf("runtime: train: %s must not be negative, got %v", fieldName(f.name), f.v)
		}
	}
	if err := checkOptions(c); err != nil {
		return err
	}
	if len(c.Hidden) > maxLayers {
		return fmt.Errorf("runtime: train: Hidden has %d layers, at most %d", len(c.Hidden), maxLayers)
	}
	for i, w := range c.Hidden {
		if w < 1 || w > maxWidth {
			return fmt.Errorf("runtime: train: Hidden[%d] = %d, widths must be in [1, %d]", i, w, maxWidth)
		}
	}
	switch {
	case c.Actors > MaxActors:
		return fmt.Errorf("runtime: train: %s must be at most %d, got %d", fieldName("Actors"), MaxActors, c.Actors)
	case c.EvalEpisodes > maxEpisodes || c.FinalEpisodes > maxEpisodes:
		return fmt.Errorf("runtime: train: EvalEpisodes and FinalEpisodes must be at most %d, got %d and %d", maxEpisodes, c.EvalEpisodes, c.FinalEpisodes)
	}
	return nil
}

// flags names the command-line flag of each TrainConfig field that has
// one, so errors speak to the CLI's users too.
var flags = map[string]string{"TargetReturn": "target-return", "LR": "lr", "ReplayRatio": "replay-ratio",
	"Tau": "tau", "Epsilon": "epsilon", "Sigma": "sigma", "OUTheta": "ou-theta",
	"Actors": "actors", "Capacity": "capacity", "Batch": "batch", "NStep": "n-step", "MinSizeToSample": "min-replay",
	"RandomSteps": "random-steps", "EpsilonDecaySteps": "epsilon-decay", "Steps": "steps", "Duration": "duration",
	"CheckpointEvery": "checkpoint-every", "Checkpoint": "checkpoint", "RefreshEvery": "refresh-every",
	"Inserters": "inserters"}

// fieldName is "Field (-flag)" for a field with a flag, else "Field".
func fieldName(f string) string {
	if fl, ok := flags[f]; ok {
		return f + " (-" + fl + ")"
	}
	return f
}

// maxLayers and maxWidth bound TrainConfig.Hidden.
const (
	maxLayers = 64
	maxWidth  = 1 << 16
)

// maxEpisodes bounds an evaluation's episodes.
const maxEpisodes = 1 << 20

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// NewTrainer validates cfg (unknown environments and samplers are errors
// listing the valid names) and builds every part of the run.
func NewTrainer(cfg TrainConfig) (*Trainer, error) { return newTrainer(cfg, nil) }

// newTrainer builds a Trainer around buf (a restored replay buffer) or, if
// buf is nil, a new one: a ReplayCore, a LearnerHost over its method and
// an ActorHost inserting into its buffer, all from one plan.
func newTrainer(cfg TrainConfig, buf *buffer.Buffer) (*Trainer, error) {
	p, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	core, err := newReplayCore(p, buf, p.netBytes(p.cfg.Actors))
	if err != nil {
		return nil, err
	}
	lh, err := newLearnerHost(p, core.method, learnerOptions{buf: core.buf, limiter: core.limiter})
	if err != nil {
		return nil, err
	}
	if err := prepareCheckpoint(p.cfg.Checkpoint); err != nil {
		return nil, err
	}
	ah, err := newActorHost(p, p.cfg.Actors, lh.store, core.buf, actorOptions{selector: core.method.Selector})
	if err != nil {
		return nil, err
	}
	t := &Trainer{cfg: p.cfg, core: core, lh: lh, ah: ah, buf: core.buf, agent: lh.agent, actors: ah.actors,
		store: lh.store, limiter: core.limiter}
	lh.saveTo = t.SaveCheckpoint
	lh.envSteps = ah.envSteps
	return t, nil
}

// Warnings are the replay method's warnings about a biased pairing
// (sampler.Method.Warnings) and, for a resumed run whose Float32 differs
// from its checkpoint's, which precision conversion its learner made; the
// caller should show them. O(warnings); a new slice.
func (t *Trainer) Warnings() []string {
	return append(slices.Clone(t.agent.method.Warnings), t.notes...)
}

// Config is the run's configuration, defaults filled in.
func (t *Trainer) Config() TrainConfig { return t.cfg }

// Policy returns a new network holding the policy the actors run, with the
// learner's latest published parameters (every learner publishes its
// initial parameters when it is built): for dqn the Q-network (act with model.Argmax), for td3 the
// actor (tanh outputs in [−1, 1], scaled by the action box's half-range),
// for sac the squashed-Gaussian policy (means and log stds; act with
// tanh of the means, actor.EvaluateSquashed), for vracer the network whose outputs are V, the action mean and the std
// pre-activations (actor.EvaluateGaussian shows how it acts). The network
// is the caller's: later publications do not change it. Safe for
// concurrent use with Run. Cost: one network allocation and copy.
func (t *Trainer) Policy() (*model.Net, error) { return t.lh.Policy() }

// counterBase holds the counters of the segments a resumed run already
// completed.
type counterBase struct {
	Seconds      float64 `json:"seconds"`
	EnvSteps     int64   `json:"env_steps"`
	Episodes     int64   `json:"episodes"`
	LearnerSteps int64   `json:"learner_steps"`
}

// Stats returns a snapshot of the run. Safe for concurrent use.
func (t *Trainer) Stats() TrainStats {
	st := t.lh.Stats()
	st.Buffer, st.Limiter = t.buf.Stats(), t.limiter.Stats()
	st.BufferSize = st.Buffer.Size
	return st
}
