package learner

import (
	"math"

	"github.com/apexrl/apex/model"
)

// Defaults of SACConfig: the values of the SAC paper with automatic
// entropy tuning (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and
// Applications", arXiv:1812.05905, Appendix D, Table 1) and its authors'
// code (softlearning).
const (
	// DefaultSACBatch is 256 transitions per step (Table 1).
	DefaultSACBatch = 256
	// DefaultSACLR is Adam's step size for the policy, both critics and
	// the temperature (Table 1: 3e-4 for all).
	DefaultSACLR = 3e-4
	// DefaultSACAlpha is the initial temperature α: softlearning starts
	// log α at 0.
	DefaultSACAlpha = 1.0
	// DefaultSACPublishEvery publishes the policy every 2 learner steps
	// (the policy changes every step; the actors read the Store every few
	// hundred environment steps, so a snapshot per step would mostly go
	// unread).
	DefaultSACPublishEvery = 2
)

// SACConfig configures the SAC learner. The zero value of a field selects
// its default (the DefaultSAC* constants above and DefaultTau); Validate
// fills them in and reports the first field out of range. MaxAction has
// no default: it is the environment's.
//
// As for TD3Config, the discount is not here (the buffer's Discount
// column holds γ^m, 0 at a termination) and neither is the critics' loss
// (the replay method's; SAC's own is "uniform" with the MSE loss, whose
// gradient 2d is PyTorch's mse_loss; the paper's J_Q = ½·E[d²] halves
// the step, which Adam's scale invariance makes immaterial).
type SACConfig struct {
	// Batch is the number of transitions sampled per step (> 0). Default
	// DefaultSACBatch (256).
	Batch int `json:"batch"`
	// PolicyLR is the policy's Adam step size (> 0, finite). Default
	// DefaultSACLR (3e-4).
	PolicyLR float64 `json:"policy_lr"`
	// CriticLR is each critic's Adam step size (> 0, finite). Default
	// DefaultSACLR (3e-4).
	CriticLR float64 `json:"critic_lr"`
	// AlphaLR is the temperature's Adam step size on log α (> 0, finite).
	// Default DefaultSACLR (3e-4).
	AlphaLR float64 `json:"alpha_lr"`
	// Adam holds Adam's remaining hyper-parameters for all four
	// optimizers (Beta1, Beta2, Eps; zero values are Kingma & Ba's 0.9,
	// 0.999, 1e-8). Its LR and ClipNorm must be left 0: set the fields of
	// SACConfig. Its Float32 must be left false: the policy's and
	// critics' optimizers follow their networks' model.Config.Float32 (the
	// temperature's, one parameter, stays float64).
	Adam model.AdamConfig `json:"adam"`
	// ClipNorm, when > 0, clips the policy's and each critic's gradient
	// separately to this global L2 norm before its Adam step (never the
	// temperature's). 0 (the default) or a negative value: no clipping,
	// as in SAC.
	ClipNorm float64 `json:"clip_norm"`
	// Tau is the Polyak rate of the two target critics, in (0, 1],
	// applied after every step. Default DefaultTau (0.005).
	Tau float64 `json:"tau"`
	// Alpha is the initial temperature α (> 0, finite). Default
	// DefaultSACAlpha (1).
	Alpha float64 `json:"alpha"`
	// TargetEntropy is the entropy H̄ the temperature steers the policy
	// toward, in nats of the squashed action in policy units (−1..1 per
	// dimension, before the scaling by MaxAction). Finite; 0 means the
	// paper's −A, minus the action width.
	TargetEntropy float64 `json:"target_entropy"`
	// PublishEvery is the number of learner steps between publishes of
	// the policy's parameters to the Store (>= 1). Default
	// DefaultSACPublishEvery (2).
	PublishEvery int `json:"publish_every"`
	// MaxAction is the environment's action bound: actions lie in
	// [−MaxAction, MaxAction] in every dimension (finite and > 0;
	// required). The policy's squashed sample tanh(u) is scaled by it.
	// As for TD3, the bounds are symmetric and equal in every dimension.
	MaxAction float64 `json:"max_action"`
	// Seed seeds the learner's stream (PCG) for sampling and the policy's
	// noise, and, on another stream, the second critic's initialisation.
	Seed uint64 `json:"seed"`
}

// Validate returns c with the defaults filled in, or an error wrapping
// ErrConfig that names the field out of range.
func (c SACConfig) Validate() (SACConfig, error) {
	fin := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Batch == 0 {
		c.Batch = DefaultSACBatch
	}
	def(&c.PolicyLR, DefaultSACLR)
	def(&c.CriticLR, DefaultSACLR)
	def(&c.AlphaLR, DefaultSACLR)
	def(&c.Tau, DefaultTau)
	def(&c.Alpha, DefaultSACAlpha)
	if c.PublishEvery == 0 {
		c.PublishEvery = DefaultSACPublishEvery
	}
	switch {
	case c.Batch < 0 || c.Batch > maxBatch:
		return c, errorf(ErrConfig, "Batch = %d (must be in 1..%d)", c.Batch, maxBatch)
	case !(c.PolicyLR > 0) || !fin(c.PolicyLR):
		return c, errorf(ErrConfig, "PolicyLR = %g (must be > 0 and finite)", c.PolicyLR)
	case !(c.CriticLR > 0) || !fin(c.CriticLR):
		return c, errorf(ErrConfig, "CriticLR = %g (must be > 0 and finite)", c.CriticLR)
	case !(c.AlphaLR > 0) || !fin(c.AlphaLR):
		return c, errorf(ErrConfig, "AlphaLR = %g (must be > 0 and finite)", c.AlphaLR)
	case c.Adam.LR != 0:
		return c, errorf(ErrConfig, "Adam.LR = %g (must be 0: set SACConfig.PolicyLR, CriticLR and AlphaLR)", c.Adam.LR)
	case c.Adam.ClipNorm != 0:
		return c, errorf(ErrConfig, "Adam.ClipNorm = %g (must be 0: set SACConfig.ClipNorm)", c.Adam.ClipNorm)
	case c.Adam.Float32:
		return c, errAdamFloat32
	case !fin(c.ClipNorm):
		return c, errorf(ErrConfig, "ClipNorm = %g (must be finite; 0 or negative: no clipping)", c.ClipNorm)
	case !(c.Tau > 0 && c.Tau <= 1):
		return c, errorf(ErrConfig, "Tau = %g (must be in (0, 1])", c.Tau)
	case !(c.Alpha > 0) || !fin(c.Alpha):
		return c, errorf(ErrConfig, "Alpha = %g (must be > 0 and finite)", c.Alpha)
	case !fin(c.TargetEntropy):
		return c, errorf(ErrConfig, "TargetEntropy = %g (must be finite; 0: minus the action width)", c.TargetEntropy)
	case c.PublishEvery < 0:
		return c, errorf(ErrConfig, "PublishEvery = %d (must be >= 1)", c.PublishEvery)
	case !(c.MaxAction > 0) || !fin(c.MaxAction):
		return c, errorf(ErrConfig, "MaxAction = %g (required: the environment's action bound, finite and > 0)", c.MaxAction)
	}
	for _, lr := range []float64{c.PolicyLR, c.CriticLR, c.AlphaLR} {
		if _, err := c.adamConfig(lr).Validate(); err != nil {
			return c, errorf(ErrConfig, "Adam: %w", err)
		}
	}
	a, _ := c.adamConfig(c.PolicyLR).Validate()
	c.Adam = model.AdamConfig{Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps}
	return c, nil
}

// adamConfig is the optimizer configuration c describes for step size lr
// (with c's gradient clipping).
func (c SACConfig) adamConfig(lr float64) model.AdamConfig {
	a := c.Adam
	a.LR = lr
	a.ClipNorm = max(c.ClipNorm, 0)
	return a
}
