package learner

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/apexrl/apex/model"
)

// Defaults of VRACERConfig: refer.md §6's CPU-scale calibration of
// V-RACER (Novati & Koumoutsakos 2019 used B = 256, eta = 1e-4 and 2×128
// units over 1e7 steps on MuJoCo; on Pendulum at 1e5 steps 1e-3, B = 128
// and 2×64 learned fastest).
const (
	// DefaultVRACERBatch is 128 steps per learner step.
	DefaultVRACERBatch = 128
	// DefaultVRACERLR is Adam's initial step size eta0; the stage's
	// LRScale anneals it (Eq. 13).
	DefaultVRACERLR = 1e-3
	// DefaultVRACERPublishEvery publishes the network every 10 steps, as
	// the DQN learner does (a snapshot per step would be 40 KiB of garbage
	// each; the actors store the behaviour they used, so a slightly older
	// policy costs nothing in correctness).
	DefaultVRACERPublishEvery = 10
	// vracerLogRhoClip bounds log rho (refer.md §7.11, the paper's code).
	vracerLogRhoClip = 7
)

// DefaultVRACERHidden is the hidden layers of V-RACER's network: 2×64
// Softsign units (refer.md §6; the paper's 2×128 for MuJoCo).
var DefaultVRACERHidden = []int{64, 64}

// VRACERConfig configures the V-RACER learner. The zero value of a field
// selects its default; Validate fills them in and reports the first field
// out of range. The discount lives in the buffer's Discount column, and
// the reward scaling and ReF-ER's parameters in the method's
// configuration (sampler.REFERConfig), which the learner's
// REFERController runs with.
type VRACERConfig struct {
	// Batch is the number of steps sampled per learner step (> 0).
	// Default DefaultVRACERBatch (128).
	Batch int `json:"batch"`
	// LR is Adam's initial step size eta0 (> 0, finite); each step uses
	// LR times the stage's LRScale, 1/(1 + A·k). Default 1e-3.
	LR float64 `json:"lr"`
	// Adam holds Adam's remaining hyper-parameters (Beta1, Beta2, Eps;
	// zero values are Kingma & Ba's). Its LR and ClipNorm must be 0, its
	// Float32 false: the optimizer follows the network's
	// model.Config.Float32.
	Adam model.AdamConfig `json:"adam"`
	// ClipNorm, when > 0, clips the gradient's global L2 norm before the
	// Adam step. 0 (the default): no clipping, as in the paper.
	ClipNorm float64 `json:"clip_norm"`
	// PublishEvery is the number of learner steps between publishes of
	// the network to the Store (>= 1). Default 10.
	PublishEvery int `json:"publish_every"`
	// KLReverse penalises KL(π||μ), the direction of the paper's 2019
	// code, instead of the paper's KL(μ||π) (refer.md §7.1). The stage's
	// KL statistics then report that direction too.
	KLReverse bool `json:"kl_reverse"`
	// Seed seeds the learner's sampling stream.
	Seed uint64 `json:"seed"`
}

// Validate returns c with the defaults filled in, or an error wrapping
// ErrConfig that names the field out of range.
func (c VRACERConfig) Validate() (VRACERConfig, error) {
	fin := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if c.Batch == 0 {
		c.Batch = DefaultVRACERBatch
	}
	if c.LR == 0 {
		c.LR = DefaultVRACERLR
	}
	if c.PublishEvery == 0 {
		c.PublishEvery = DefaultVRACERPublishEvery
	}
	switch {
	case c.Batch < 0 || c.Batch > maxBatch:
		return c, errorf(ErrConfig, "Batch = %d (must be in 1..%d)", c.Batch, maxBatch)
	case !(c.LR > 0) || !fin(c.LR):
		return c, errorf(ErrConfig, "LR = %g (must be > 0 and finite)", c.LR)
	case c.Adam.LR != 0:
		return c, errorf(ErrConfig, "Adam.LR = %g (must be 0: set VRACERConfig.LR)", c.Adam.LR)
	case c.Adam.ClipNorm != 0:
		return c, errorf(ErrConfig, "Adam.ClipNorm = %g (must be 0: set VRACERConfig.ClipNorm)", c.Adam.ClipNorm)
	case c.Adam.Float32:
		return c, errAdamFloat32
	case !(c.ClipNorm >= 0) || !fin(c.ClipNorm):
		return c, errorf(ErrConfig, "ClipNorm = %g (must be finite and >= 0; 0: no clipping)", c.ClipNorm)
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

// adamConfig is the optimizer configuration c describes (initial LR).
func (c VRACERConfig) adamConfig() model.AdamConfig {
	a := c.Adam
	a.LR = c.LR
	a.ClipNorm = c.ClipNorm
	return a
}

// VRACERNetConfig is the model.Config of V-RACER's network for
// observations of obsDim values and actions of actionDim values: hidden
// (nil: DefaultVRACERHidden) Softsign layers and a linear output row laid
// out as model.GaussianHead{Dim: actionDim} reads it, [V, mean, std
// parameters] (1 + 2·actionDim values). Actors build their copy from the
// same Config (model.NewNet(cfg, nil)) and load the learner's snapshots.
func VRACERNetConfig(obsDim, actionDim int, hidden []int) model.Config {
	if hidden == nil {
		hidden = DefaultVRACERHidden
	}
	return model.Config{In: obsDim, Hidden: slices.Clone(hidden), Out: 1 + 2*actionDim, Act: model.Softsign, OutAct: model.Identity}
}

// NewVRACERNet builds VRACERNetConfig(obsDim, actionDim, hidden) and
// initialises it as the paper does (App. A): hidden layers Glorot uniform
// (model.NewNet, drawing from rng), the output layer's weights
// U(±0.1/sqrt(fan-in)) so that V and the mean start near 0, except the
// std parameters' weights, which are 0 and stay 0 (the std is a learned
// vector shared by all states); the std parameters' biases are set so
// that every action dimension starts at model.InitialStd (variance 0.2).
// Errors wrap ErrConfig (actionDim < 1, a nil rng: an actor's copy is
// model.NewNet(VRACERNetConfig(...), nil)) or model.ErrConfig.
func NewVRACERNet(obsDim, actionDim int, hidden []int, rng *rand.Rand) (*model.Net, error) {
	if actionDim < 1 {
		return nil, errorf(ErrConfig, "NewVRACERNet: actionDim = %d (must be >= 1)", actionDim)
	}
	if rng == nil {
		return nil, errorf(ErrConfig, "NewVRACERNet: nil rng (the initialisation draws from it)")
	}
	n, err := model.NewNet(VRACERNetConfig(obsDim, actionDim, hidden), rng)
	if err != nil {
		return nil, err
	}
	fanIn, width := outputLayer(n)
	p := n.Params()
	off := len(p) - model.DenseParams(fanIn, width)
	lim := 0.1 / math.Sqrt(float64(fanIn))
	head := model.GaussianHead{Dim: actionDim}
	for r := range fanIn {
		for c := range width {
			w := 0.0
			if c < 1+head.Dim {
				w = (2*rng.Float64() - 1) * lim
			}
			p[off+r*width+c] = w
		}
	}
	u := model.GaussStdParam(model.InitialStd)
	for c := range width {
		b := 0.0
		if c >= 1+head.Dim {
			b = u
		}
		p[off+fanIn*width+c] = b
	}
	return n, nil
}

// outputLayer returns the output layer's fan-in and width.
func outputLayer(n *model.Net) (fanIn, width int) {
	c := n.Config()
	fanIn = c.In
	if len(c.Hidden) > 0 {
		fanIn = c.Hidden[len(c.Hidden)-1]
	}
	return fanIn, c.Out
}

// stdWeights returns the flat indices of the output layer's weights into
// the std parameters (columns 1+dA .. 2dA of W), which V-RACER keeps at 0.
func stdWeights(n *model.Net, dA int) []int {
	fanIn, width := outputLayer(n)
	off := n.NumParams() - model.DenseParams(fanIn, width)
	idx := make([]int, 0, fanIn*dA)
	for r := range fanIn {
		for c := 1 + dA; c < width; c++ {
			idx = append(idx, off+r*width+c)
		}
	}
	return idx
}
