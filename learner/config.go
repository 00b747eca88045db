package learner

import (
	"errors"
	"fmt"
	"math"

	"github.com/apexrl/apex/model"
)

// Defaults of DQNConfig, chosen for classic control (CartPole, Acrobot,
// MountainCar: observations of 2–6 values, a 4→64→64→2 network of about
// 4.5k parameters) on a small CPU machine. Ape-X's Atari values are given
// beside each for comparison (Horgan et al. 2018, arXiv:1803.00933, App. C).
const (
	// DefaultBatch is 64 transitions per step. Ape-X replays 512 per step
	// on a GPU, where a larger batch costs almost nothing more; on a CPU a
	// step costs about linearly in the batch (about 0.4 ms at 64 and 1.6 ms
	// at 256 for the 4→64→64→2 network, see the package doc), so at a fixed
	// sample-to-insert ratio a batch of 64 buys four times as many updates
	// as 256. Classic-control targets are smooth and low-dimensional and
	// gain more from update count than from lower gradient variance: the
	// common DQN settings for them use 32–128 (cleanrl's CartPole DQN 128,
	// SB3 zoo 64).
	DefaultBatch = 64
	// DefaultLR is Adam's step size. Ape-X uses 0.00025/4 with centred
	// RMSProp for convolutional Atari networks; small MLPs on classic
	// control train well and fast at Adam's own default 1e-3.
	DefaultLR = 1e-3
	// DefaultClipNorm clips the gradient's global L2 norm to 10: it only
	// acts on the rare large TD errors of early training and of new
	// max-priority items (Huber already bounds each sample's gradient by
	// its weight), as Stable-Baselines3's DQN does (max_grad_norm 10).
	DefaultClipNorm = 10
	// DefaultTargetEvery copies the online network into the target network
	// every 500 learner steps. Ape-X uses 2500 with 512-transition batches;
	// 500 is cleanrl's CartPole DQN setting and, at about 2.5k updates/s
	// on the development machine, refreshes the target about five times a
	// second while the regression targets stand still for hundreds of
	// updates.
	DefaultTargetEvery = 500
	// DefaultPublishEvery publishes the online parameters to the actors'
	// Store every 10 learner steps. A publish copies every parameter into
	// a fresh immutable snapshot (it cannot be recycled: actors may still
	// hold it): measured on the 4→64→64→2 network, about 8 µs (2% of a
	// B=64 step) and 40 KiB of garbage, which after every step is ~100 MB/s
	// for the collector on a machine the actors share. Every 10 steps both
	// are ten times smaller, and the snapshot the actors see is at most 9
	// updates (about 4 ms) older than the learner's network, far below the
	// staleness of the actors' own refresh (Ape-X: every 400 environment
	// steps per actor, a fraction of a second here).
	DefaultPublishEvery = 10
)

// DQNConfig configures the Double DQN learner. The zero value of a field
// selects its default (the Default* constants); Validate fills them in and
// reports the first field out of range.
//
// The discount factor is not here: the buffer's Discount column holds γ^m
// for an m-step return (0 at a termination), written by the actors' n-step
// adder, and the learner uses it as given. Nor is the loss: it belongs to
// the replay method (sampler.Method.Loss) that NewDQN takes, because a
// prioritized stage and its loss are one choice (Fujimoto et al. 2020).
type DQNConfig struct {
	// Batch is the number of transitions sampled per step (> 0). Default
	// DefaultBatch (64); Ape-X: 512.
	Batch int `json:"batch"`
	// LR is Adam's step size (> 0, finite). Default DefaultLR (1e-3).
	LR float64 `json:"lr"`
	// ClipNorm clips the gradient's global L2 norm before each Adam step.
	// 0 selects DefaultClipNorm (10); a negative value disables clipping.
	ClipNorm float64 `json:"clip_norm"`
	// Adam holds Adam's remaining hyper-parameters (Beta1, Beta2, Eps; zero
	// values are Kingma & Ba's 0.9, 0.999, 1e-8). Its LR and ClipNorm must
	// be left 0: set the fields above. Its Float32 must be left false: the
	// optimizer follows the network's precision (see adamFor).
	Adam model.AdamConfig `json:"adam"`
	// TargetEvery is the number of learner steps between hard copies of
	// the online network into the target network, when Tau is 0 (>= 1).
	// Default DefaultTargetEvery (500); Ape-X: 2500.
	TargetEvery int `json:"target_every"`
	// Tau, when > 0, replaces the hard copies by a Polyak update after
	// every step, θ_target ← τ·θ + (1−τ)·θ_target (TargetEvery is then
	// unused). In [0, 1]; 0 (the default) means hard copies.
	Tau float64 `json:"tau"`
	// PublishEvery is the number of learner steps between publishes of the
	// online parameters to the Store the actors read (>= 1). Default
	// DefaultPublishEvery (10).
	PublishEvery int `json:"publish_every"`
	// Seed seeds the learner's sampling stream (PCG). The same seed, the
	// same buffer contents and the same configuration give the same run.
	Seed uint64 `json:"seed"`
}

// maxBatch bounds Batch so the scratch allocation stays sane.
const maxBatch = 1 << 20

// Validate returns c with the defaults filled in, or an error wrapping
// ErrConfig that names the field out of range.
func (c DQNConfig) Validate() (DQNConfig, error) {
	fin := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.LR == 0 {
		c.LR = DefaultLR
	}
	if c.ClipNorm == 0 {
		c.ClipNorm = DefaultClipNorm
	}
	if c.TargetEvery == 0 {
		c.TargetEvery = DefaultTargetEvery
	}
	if c.PublishEvery == 0 {
		c.PublishEvery = DefaultPublishEvery
	}
	switch {
	case c.Batch < 0 || c.Batch > maxBatch:
		return c, errorf(ErrConfig, "Batch = %d (must be in 1..%d)", c.Batch, maxBatch)
	case !(c.LR > 0) || !fin(c.LR):
		return c, errorf(ErrConfig, "LR = %g (must be > 0 and finite)", c.LR)
	case !fin(c.ClipNorm):
		return c, errorf(ErrConfig, "ClipNorm = %g (must be finite; negative disables clipping)", c.ClipNorm)
	case c.Adam.LR != 0:
		return c, errorf(ErrConfig, "Adam.LR = %g (must be 0: set DQNConfig.LR)", c.Adam.LR)
	case c.Adam.ClipNorm != 0:
		return c, errorf(ErrConfig, "Adam.ClipNorm = %g (must be 0: set DQNConfig.ClipNorm)", c.Adam.ClipNorm)
	case c.Adam.Float32:
		return c, errAdamFloat32
	case c.TargetEvery < 0:
		return c, errorf(ErrConfig, "TargetEvery = %d (must be >= 1)", c.TargetEvery)
	case !(c.Tau >= 0 && c.Tau <= 1):
		return c, errorf(ErrConfig, "Tau = %g (must be in [0, 1]; 0 selects hard copies every TargetEvery steps)", c.Tau)
	case c.PublishEvery < 0:
		return c, errorf(ErrConfig, "PublishEvery = %d (must be >= 1)", c.PublishEvery)
	}
	a, err := c.adamConfig().Validate()
	if err != nil {
		return c, errorf(ErrConfig, "Adam: %w", err)
	}
	c.Adam = model.AdamConfig{Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps}
	return c, nil
}

// adamConfig is the optimizer configuration c describes.
func (c DQNConfig) adamConfig() model.AdamConfig {
	a := c.Adam
	a.LR = c.LR
	a.ClipNorm = max(c.ClipNorm, 0)
	return a
}

// adamFor returns a with Float32 set exactly when net runs on the float32
// path (model.Config.Float32): a learner's optimizer follows the precision
// of the network it updates, so one switch, the networks', selects the
// float32 learner step, and float64 networks keep the float64 Adam bit for
// bit. (A float32 network with a float64 Adam would keep float64 master
// parameters, but pays three P-sized float64 passes a step for precision
// the float32 Forward rounds away; an explicit config field would add a
// second switch that must agree with the first.)
func adamFor(a model.AdamConfig, net *model.Net) model.AdamConfig {
	a.Float32 = net.Config().Float32
	return a
}

// errAdamFloat32 refuses a learner config that sets Adam.Float32 itself.
var errAdamFloat32 = errorf(ErrConfig, "Adam.Float32 = true (must be false: the optimizers follow their networks' model.Config.Float32)")

// Sentinel errors. Errors returned by this package wrap one of these (or
// the model, buffer or sampler error they come from) with %w and say what
// was wrong.
var (
	// ErrConfig: a DQNConfig or TD3Config field is out of range, or the
	// parts given to NewDQN or NewTD3 do not fit together (networks,
	// buffer, method, batch).
	ErrConfig = errors.New("learner: invalid config")
	// ErrCorrupt: a learner checkpoint that cannot be read back (empty,
	// truncated, bad magic, unknown version, bad checksum, inconsistent
	// contents).
	ErrCorrupt = errors.New("learner: corrupt checkpoint")
	// ErrMismatch: a valid checkpoint written by a learner with another
	// configuration or network shape than the one loading it.
	ErrMismatch = errors.New("learner: checkpoint does not match the learner")
	// ErrAction: a sampled transition's action is outside the network's
	// action range (a buffer without Config.NumActions accepts any int32).
	ErrAction = errors.New("learner: action out of range")
)

// stepError wraps err, a step's failure, with the step number; a
// non-finite parameter or gradient of net (What "params" or "gradient")
// gets its place in net (Where) if it has none. Other non-finite values (a
// loss, a batch's TD errors) index rows, not parameters, and are left as
// they are. net may be nil.
func stepError(step uint64, net *model.Net, err error) error {
	var nf *model.NonFiniteError
	if net != nil && errors.As(err, &nf) && nf.Where == "" && (nf.What == "params" || nf.What == "gradient") &&
		nf.Index >= 0 && nf.Index < net.NumParams() {
		nf.Where = net.Where(nf.Index)
	}
	return fmt.Errorf("learner: step %d: %w", step, err)
}

// errorf wraps sentinel with a formatted reason.
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}
