package learner

import (
	"math"

	"github.com/apexrl/apex/model"
)

// Defaults of TD3Config: the values of the TD3 paper and its authors' code
// (Fujimoto et al. 2018, arXiv:1802.09477, §6 and Appendix C), which LAP
// and PAL keep for MuJoCo (Fujimoto et al. 2020, arXiv:2007.06049, §6).
const (
	// DefaultTD3Batch is 256 transitions per step (the authors' code; the
	// paper's first version used 100).
	DefaultTD3Batch = 256
	// DefaultTD3LR is Adam's step size for the actor and both critics.
	DefaultTD3LR = 3e-4
	// DefaultTau is the Polyak rate of all three target networks,
	// θ' ← τ·θ + (1−τ)·θ'.
	DefaultTau = 0.005
	// DefaultPolicyNoise is the standard deviation of the target policy
	// smoothing noise, in units of MaxAction (σ̃ = 0.2 for actions in
	// [−1, 1]).
	DefaultPolicyNoise = 0.2
	// DefaultNoiseClip bounds the smoothing noise to ±0.5·MaxAction.
	DefaultNoiseClip = 0.5
	// DefaultPolicyDelay updates the actor and the target networks once per
	// two critic updates (d = 2).
	DefaultPolicyDelay = 2
	// DefaultTD3PublishEvery publishes the actor every 2 learner steps:
	// with the default PolicyDelay, after every actor update, and never a
	// snapshot of an actor that did not change.
	DefaultTD3PublishEvery = 2
)

// TD3Config configures the TD3 learner. The zero value of a field selects
// its default (the Default* constants above); Validate fills them in and
// reports the first field out of range. MaxAction has no default: it is
// the environment's.
//
// As for DQNConfig, the discount is not here (the buffer's Discount column
// holds γ^m, 0 at a termination) and neither is the loss (the replay
// method's; TD3's own is "uniform" with the MSE loss). Exploration noise is
// the actors' business, not the learner's.
type TD3Config struct {
	// Batch is the number of transitions sampled per step (> 0). Default
	// DefaultTD3Batch (256).
	Batch int `json:"batch"`
	// ActorLR is the actor's Adam step size (> 0, finite). Default
	// DefaultTD3LR (3e-4).
	ActorLR float64 `json:"actor_lr"`
	// CriticLR is each critic's Adam step size (> 0, finite). Default
	// DefaultTD3LR (3e-4).
	CriticLR float64 `json:"critic_lr"`
	// Adam holds Adam's remaining hyper-parameters for all three
	// optimizers (Beta1, Beta2, Eps; zero values are Kingma & Ba's 0.9,
	// 0.999, 1e-8). Its LR and ClipNorm must be left 0: set the fields of
	// TD3Config. Its Float32 must be left false: each optimizer follows
	// its network's model.Config.Float32.
	Adam model.AdamConfig `json:"adam"`
	// ClipNorm, when > 0, clips each network's gradient (the actor's and
	// each critic's separately) to this global L2 norm before its Adam
	// step. 0 (the default) or a negative value: no clipping, as in TD3.
	ClipNorm float64 `json:"clip_norm"`
	// Tau is the Polyak rate of the target networks, in (0, 1]. Default
	// DefaultTau (0.005).
	Tau float64 `json:"tau"`
	// PolicyNoise is the standard deviation σ̃ of the Gaussian noise added
	// to the target policy's action, in units of MaxAction (finite).
	// Default DefaultPolicyNoise (0.2). A negative value turns target
	// policy smoothing off (the "TD3 without smoothing" ablation).
	PolicyNoise float64 `json:"policy_noise"`
	// NoiseClip bounds that noise to ±NoiseClip·MaxAction (> 0, finite).
	// Default DefaultNoiseClip (0.5).
	NoiseClip float64 `json:"noise_clip"`
	// PolicyDelay is the number of critic updates per actor update and
	// target update (>= 1). Default DefaultPolicyDelay (2).
	PolicyDelay int `json:"policy_delay"`
	// PublishEvery is the number of learner steps between publishes of
	// the actor's parameters to the Store (>= 1). Default
	// DefaultTD3PublishEvery (2). The actor only changes every
	// PolicyDelay steps, so a multiple of PolicyDelay avoids publishing
	// unchanged snapshots.
	PublishEvery int `json:"publish_every"`
	// MaxAction is the environment's action bound: actions lie in
	// [−MaxAction, MaxAction] in every dimension (finite and > 0;
	// required). The actor network's bounded output (Tanh) is scaled by
	// it, and the smoothed target action is clipped to it. Like the
	// authors' code, TD3 assumes symmetric bounds equal in every
	// dimension: rescale an environment whose bounds are not.
	MaxAction float64 `json:"max_action"`
	// Seed seeds the learner's stream (PCG) for sampling and the target
	// smoothing noise, and, on another stream, the second critic's
	// initialisation.
	Seed uint64 `json:"seed"`
}

// Validate returns c with the defaults filled in, or an error wrapping
// ErrConfig that names the field out of range.
func (c TD3Config) Validate() (TD3Config, error) {
	fin := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Batch == 0 {
		c.Batch = DefaultTD3Batch
	}
	def(&c.ActorLR, DefaultTD3LR)
	def(&c.CriticLR, DefaultTD3LR)
	def(&c.Tau, DefaultTau)
	def(&c.PolicyNoise, DefaultPolicyNoise)
	def(&c.NoiseClip, DefaultNoiseClip)
	if c.PolicyDelay == 0 {
		c.PolicyDelay = DefaultPolicyDelay
	}
	if c.PublishEvery == 0 {
		c.PublishEvery = DefaultTD3PublishEvery
	}
	switch {
	case c.Batch < 0 || c.Batch > maxBatch:
		return c, errorf(ErrConfig, "Batch = %d (must be in 1..%d)", c.Batch, maxBatch)
	case !(c.ActorLR > 0) || !fin(c.ActorLR):
		return c, errorf(ErrConfig, "ActorLR = %g (must be > 0 and finite)", c.ActorLR)
	case !(c.CriticLR > 0) || !fin(c.CriticLR):
		return c, errorf(ErrConfig, "CriticLR = %g (must be > 0 and finite)", c.CriticLR)
	case c.Adam.LR != 0:
		return c, errorf(ErrConfig, "Adam.LR = %g (must be 0: set TD3Config.ActorLR and CriticLR)", c.Adam.LR)
	case c.Adam.ClipNorm != 0:
		return c, errorf(ErrConfig, "Adam.ClipNorm = %g (must be 0: set TD3Config.ClipNorm)", c.Adam.ClipNorm)
	case c.Adam.Float32:
		return c, errAdamFloat32
	case !fin(c.ClipNorm):
		return c, errorf(ErrConfig, "ClipNorm = %g (must be finite; 0 or negative: no clipping)", c.ClipNorm)
	case !(c.Tau > 0 && c.Tau <= 1):
		return c, errorf(ErrConfig, "Tau = %g (must be in (0, 1])", c.Tau)
	case !fin(c.PolicyNoise):
		return c, errorf(ErrConfig, "PolicyNoise = %g (must be finite; negative: no smoothing)", c.PolicyNoise)
	case !(c.NoiseClip > 0) || !fin(c.NoiseClip):
		return c, errorf(ErrConfig, "NoiseClip = %g (must be > 0 and finite)", c.NoiseClip)
	case c.PolicyDelay < 0:
		return c, errorf(ErrConfig, "PolicyDelay = %d (must be >= 1)", c.PolicyDelay)
	case c.PublishEvery < 0:
		return c, errorf(ErrConfig, "PublishEvery = %d (must be >= 1)", c.PublishEvery)
	case !(c.MaxAction > 0) || !fin(c.MaxAction):
		return c, errorf(ErrConfig, "MaxAction = %g (required: the environment's action bound, finite and > 0)", c.MaxAction)
	}
	for _, lr := range []float64{c.ActorLR, c.CriticLR} {
		if _, err := c.adamConfig(lr).Validate(); err != nil {
			return c, errorf(ErrConfig, "Adam: %w", err)
		}
	}
	a, _ := c.adamConfig(c.ActorLR).Validate()
	c.Adam = model.AdamConfig{Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps}
	return c, nil
}

// adamConfig is the optimizer configuration c describes for step size lr.
func (c TD3Config) adamConfig(lr float64) model.AdamConfig {
	a := c.Adam
	a.LR = lr
	a.ClipNorm = max(c.ClipNorm, 0)
	return a
}
