package runtime

import (
	"errors"
	"fmt"

	"github.com/apexrl/apex/actor"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/learner"
	"github.com/apexrl/apex/sampler"
)

// plan is a TrainConfig checked and resolved against its environment and
// replay method: what every part of a run (ReplayCore, LearnerHost,
// ActorHost, Trainer) is built from, so that a run is assembled in one
// place whether its parts share a process or not.
type plan struct {
	// cfg has every default filled in, Batch and LR the learner's
	// effective values: resolving it again gives it back unchanged.
	cfg    TrainConfig
	spec   sampler.Spec
	mcfg   sampler.MethodConfig
	probe  envs.Env // an environment of cfg.Env, for its spaces
	obsDim int
	space  envs.Space
	// layout is the replay buffer's layout (Capacity cfg.Capacity).
	layout buffer.Config
}

// resolve validates cfg (unknown environments and samplers are errors
// listing the valid names; every field is checked, naming its flag) and
// resolves it: the checks and defaults NewTrainer has always applied,
// before anything large is allocated. Cost: one environment and O(config).
func resolve(cfg TrainConfig) (*plan, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	orDefault(&cfg.Env, DefaultTrainConfig().Env)
	probe, err := envs.Make(cfg.Env)
	if err != nil {
		return nil, err
	}
	orDefault(&cfg.Sampler, DefaultTrainConfig().Sampler)
	spec, err := methodSpec(cfg.Sampler)
	if err != nil {
		return nil, err
	}
	algo, err := algoFor(cfg.Algo, cfg.Env, spec, probe.ActionSpace())
	if err != nil {
		return nil, err
	}
	if err := checkApplies(cfg, algo); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults(algo, probe.MaxEpisodeSteps())
	switch {
	case cfg.Steps < 0 || cfg.Duration < 0:
		return nil, fmt.Errorf("runtime: train: Steps and Duration must not be negative, got %d and %v", cfg.Steps, cfg.Duration)
	case cfg.Steps == 0 && cfg.Duration == 0:
		return nil, errors.New("runtime: train: set Steps or Duration (or both)")
	}
	if cfg.Inserters < Direct || cfg.Inserters > MaxInserters {
		return nil, fmt.Errorf("runtime: train: %s must be in [%d, %d] (%d: each actor inserts directly, 0: %d inserter), got %d",
			fieldName("Inserters"), Direct, MaxInserters, Direct, DefaultInserters, cfg.Inserters)
	}
	if cfg.LearnerWorkers < 0 || cfg.LearnerWorkers > MaxLearnerWorkers {
		return nil, fmt.Errorf("runtime: train: %s must be in [0, %d] (0: 1, the serial step), got %d",
			fieldName("LearnerWorkers"), MaxLearnerWorkers, cfg.LearnerWorkers)
	}
	if cfg.Deterministic && cfg.Inserters != 0 {
		return nil, fmt.Errorf("runtime: train: %s configures the concurrent schedule; the deterministic mode inserts on its one goroutine", fieldName("Inserters"))
	}
	if cfg.Deterministic && (cfg.Actors != 1 || cfg.Steps <= 0 || cfg.Duration > 0) {
		return nil, fmt.Errorf("runtime: train: the deterministic mode needs Actors = 1, Steps > 0 and no Duration (got %d actors, %d steps, %v)",
			cfg.Actors, cfg.Steps, cfg.Duration)
	}
	// PER's beta anneals to 1 over the run's learner steps; a run bounded
	// only by time anneals over DefaultBetaSteps.
	betaSteps := cfg.Steps
	if betaSteps == 0 {
		betaSteps = DefaultBetaSteps
	}
	mcfg, err := methodConfig(cfg, spec, betaSteps, probe)
	if err != nil {
		return nil, err
	}
	obsDim := len(probe.ObservationSpace().Low)
	// The learner's effective batch and learning rate, for the record and
	// for the limiter (the learner built later must agree: checked there).
	batch, lr := learnerDefaults(cfg.Algo)
	orDefault(&cfg.Batch, batch)
	orDefault(&cfg.LR, lr)
	// The limiter admits a batch before the inserter has stored it, so up to
	// one actor batch may be counted but not yet sampleable: learning must
	// not start before a learner batch is surely stored.
	if need := cfg.Batch + actor.DefaultLocalBatch; cfg.MinSizeToSample < need {
		return nil, fmt.Errorf("runtime: train: %s must be at least the learner batch plus an actor batch (%d + %d = %d), got %d",
			fieldName("MinSizeToSample"), cfg.Batch, actor.DefaultLocalBatch, need, cfg.MinSizeToSample)
	}
	if cfg.Capacity < cfg.MinSizeToSample {
		return nil, fmt.Errorf("runtime: train: %s %d cannot hold the %d items learning waits for (%s)",
			fieldName("Capacity"), cfg.Capacity, cfg.MinSizeToSample, fieldName("MinSizeToSample"))
	}
	return &plan{cfg: cfg, spec: spec, mcfg: mcfg, probe: probe, obsDim: obsDim, space: probe.ActionSpace(),
		layout: bufferConfig(cfg, spec, mcfg, obsDim, probe.ActionSpace())}, nil
}

// learnerDefaults are the batch and learning rate of algo's learner when
// TrainConfig leaves them 0.
func learnerDefaults(algo string) (batch int, lr float64) {
	switch algo {
	case "td3":
		return learner.DefaultTD3Batch, learner.DefaultTD3LR
	case "sac":
		return learner.DefaultSACBatch, learner.DefaultSACLR
	case "vracer":
		return learner.DefaultVRACERBatch, learner.DefaultVRACERLR
	}
	return learner.DefaultBatch, learner.DefaultLR
}

// newLimiter is the run's rate limiter: ReplayRatio samples per insert,
// MinSizeToSample, an error buffer of two learner batches' worth of
// samples (at least one per insert).
func newLimiter(cfg TrainConfig) (*RateLimiter, error) {
	return NewRateLimiter(RateLimiterConfig{SamplesPerInsert: cfg.ReplayRatio, MinSizeToSample: int64(cfg.MinSizeToSample),
		ErrorBuffer: max(cfg.ReplayRatio, 1) * float64(2*cfg.Batch)})
}

// netBytes is the estimate of the networks this plan builds with actors
// actor copies of the policy (checkMemory).
func (p *plan) netBytes(actors int) uint64 {
	actDim, out := 0, 1
	switch s := p.space.(type) {
	case envs.Discrete:
		out = s.N
	case envs.Box:
		actDim, out = s.Dim(), 2*s.Dim()+1
	}
	return netBytes(actors, p.obsDim+actDim, p.cfg.Hidden, out)
}

// checkShape refuses a restored buffer whose layout does not fit the plan
// (errShape).
func (p *plan) checkShape(buf *buffer.Buffer) error {
	bcfg := p.layout
	if got := buf.Config(); got.Capacity != bcfg.Capacity || got.ObsDim != bcfg.ObsDim || got.NumActions != bcfg.NumActions ||
		got.Action != bcfg.Action || (bcfg.Action == buffer.Continuous && got.ActionDim != bcfg.ActionDim) {
		return fmt.Errorf("%w: the restored buffer (capacity %d, %d observations, %v actions %d/%d) does not fit %s with capacity %d",
			errShape, got.Capacity, got.ObsDim, got.Action, got.NumActions, got.ActionDim, p.cfg.Env, p.cfg.Capacity)
	}
	return nil
}
