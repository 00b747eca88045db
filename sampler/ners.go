package sampler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/apexrl/apex/buffer"
)

// NERS defaults (Oh et al. 2021, Table B.1 and the official code; notes
// in per-ners.md §2.3 and §6).
const (
	// DefaultNERSAlpha is the exponent of priority = score^alpha.
	DefaultNERSAlpha = 0.5
	// DefaultNERSInterval is the fewest learner steps between two updates
	// of the scorer (the official code updates every 1000 steps, after an
	// evaluation).
	DefaultNERSInterval = 1000
	// DefaultNERSTrainSize is n = |I_train|, the items of one REINFORCE
	// step (the paper's 128; the code's 32).
	DefaultNERSTrainSize = 128
	// DefaultNERSHistory bounds the reservoir of sampled refs that stands
	// for the multiset I_cal of indices sampled since the last update.
	DefaultNERSHistory = 1 << 15
	// nersFresh is the value of the TD, Q and target features of an item
	// the learner has not yet reported on (App. B: 1.0 while unknown).
	nersFresh = 1.0
	// nersStdEps keeps the standardisation's divisor above 0.
	nersStdEps = 1e-8
)

// NERSConfig configures the NERS stage. Zero fields take the defaults noted.
type NERSConfig struct {
	// Alpha is the exponent of the stored priority score^Alpha (Eq. 1).
	// Finite and >= 0; 0 means DefaultNERSAlpha (0.5). Use a tiny value,
	// not 0, to approach uniform.
	Alpha float64
	// Beta is the importance-sampling exponent w_i = (N·P(i))^-beta (Eq.
	// 5) as a schedule of the learner step; 0.4 → 1 in the paper
	// (DefaultNERSConfig). Start and End in [0, 1]; unlike the other
	// fields, the zero value is meaningful: beta 0 throughout, no
	// correction.
	Beta Linear
	// Normalize says how weights are scaled to at most 1 (the official
	// code divides by the batch maximum; NormalizeBuffer, the zero value,
	// needs the buffer's min tree).
	Normalize buffer.Normalization
	// Interval is the fewest learner steps (Sample calls) between two
	// REINFORCE updates of the scorer; an evaluation reported earlier is
	// ignored (the reward spans at least Interval steps). >= 0; 0 means
	// DefaultNERSInterval.
	Interval int
	// TrainSize is n, the items of I_train drawn for one update. >= 0; 0
	// means DefaultNERSTrainSize.
	TrainSize int
	// History is the capacity of the reservoir of sampled refs that
	// I_train is drawn from. >= TrainSize and at most buffer.MaxCapacity;
	// 0 means DefaultNERSHistory.
	History int
	// Horizon is the environment's episode time limit: the time feature
	// is EpisodeStep/Horizon. >= 0; 0 leaves the feature at 0 (also when
	// the buffer stores no episode columns).
	Horizon int
	// ActionScale divides continuous actions before they become features
	// (the action box's half-range). >= 0; 0 means 1.
	ActionScale float64
	// AbsTD feeds |δ| instead of the signed δ (the official code's
	// per-sample loss is >= 0; the paper writes the signed error).
	AbsTD bool
	// NormalizeTrain trains the scorer on Eq. 7 with each item's
	// probability normalised within I_train (p_i = σ_i^Alpha / Σ σ^Alpha,
	// NERSNet.ReinforceNormalized) instead of the official code's
	// log σ_i (per-ners.md §6.5 offers both).
	NormalizeTrain bool
	// RawFeatures turns off the running standardisation: each feature
	// is then tanh of its raw value, as the official code does. By
	// default each feature is tanh((x − mean)/sd) with the mean and sd of
	// that feature over every row the stage has scored.
	RawFeatures bool
	// Net configures the scorer; its In is set from the buffer's layout.
	Net NERSNetConfig
	// Seed seeds the scorer's initialisation and the draws of I_train.
	Seed uint64
}

// DefaultNERSConfig is the paper's setting: alpha 0.5, beta 0.4 → 1 over
// betaSteps learner steps, weights normalised by the buffer maximum,
// updates at most every 1000 steps on n = 128 items, and the default
// scorer.
func DefaultNERSConfig(betaSteps int64) NERSConfig {
	return NERSConfig{Alpha: DefaultNERSAlpha, Beta: Linear{Start: DefaultPERBeta0, End: 1, Steps: betaSteps}}
}

// withDefaults fills the zero fields.
func (c NERSConfig) withDefaults() NERSConfig {
	if c.Alpha == 0 {
		c.Alpha = DefaultNERSAlpha
	}
	if c.Interval == 0 {
		c.Interval = DefaultNERSInterval
	}
	if c.TrainSize == 0 {
		c.TrainSize = DefaultNERSTrainSize
	}
	if c.History == 0 {
		c.History = max(DefaultNERSHistory, c.TrainSize)
	}
	if c.ActionScale == 0 {
		c.ActionScale = 1
	}
	return c
}

// Validate reports the first field out of range, wrapping buffer.ErrConfig.
// The scorer's configuration is checked by NewNERS.
func (c NERSConfig) Validate() error {
	c = c.withDefaults()
	if err := checkExponent("ners", "Alpha", c.Alpha); err != nil {
		return err
	}
	if err := checkBeta("ners", c.Beta); err != nil {
		return err
	}
	if err := checkNorm("ners", c.Normalize); err != nil {
		return err
	}
	switch {
	case c.Interval < 1:
		return fmt.Errorf("%w: ners: Interval must be >= 1, got %d", buffer.ErrConfig, c.Interval)
	case c.TrainSize < 1:
		return fmt.Errorf("%w: ners: TrainSize must be >= 1, got %d", buffer.ErrConfig, c.TrainSize)
	case c.History < c.TrainSize:
		return fmt.Errorf("%w: ners: History (%d) must be >= TrainSize (%d)", buffer.ErrConfig, c.History, c.TrainSize)
	case c.History > buffer.MaxCapacity:
		return fmt.Errorf("%w: ners: History (%d) must be at most %d", buffer.ErrConfig, c.History, buffer.MaxCapacity)
	case c.Horizon < 0:
		return fmt.Errorf("%w: ners: Horizon must be >= 0, got %d", buffer.ErrConfig, c.Horizon)
	case !(c.ActionScale > 0) || math.IsInf(c.ActionScale, 1):
		return fmt.Errorf("%w: ners: ActionScale must be finite and > 0, got %v", buffer.ErrConfig, c.ActionScale)
	}
	// The scorer's input width comes from the buffer (NewNERS sets it);
	// every other field, floats included, is checked here.
	net := c.Net
	if net.In == 0 {
		net.In = 1
	}
	if err := net.Validate(); err != nil {
		return fmt.Errorf("Net: %w", err)
	}
	return nil
}

// NERS is Neural Experience Replay Sampling (Oh et al., ICLR 2021, arXiv
// 2007.07358): a learned, permutation-equivariant scorer sets the
// priorities of the buffer's sum tree.
//
// Per learner step (Alg. 1):
//
//  1. Sample draws the batch I stratified-proportionally to the stored
//     priorities score^Alpha (the tree) and adds its refs to the history;
//     Weights gives (N·P(i))^-beta from the probabilities actually used.
//  2. The learner trains and reports each row's Q(s, a) and target y
//     (UpdateFeatures); δ = y − Q. The stage stores them per slot, builds
//     the batch's features D(I) (Eq. 2: s, a, r, s', t/Horizon, δ, Q, y),
//     scores the batch as a set (Eq. 3–4) and writes score^Alpha back as
//     the rows' priorities, batch-wise.
//  3. Evaluated(mean return) reports an evaluation (from any goroutine).
//     At the next Sample at least Interval steps after the last update,
//     the replay reward r_re = this evaluation's return minus the one at
//     the last update (Eq. 6; the first evaluation only sets the
//     baseline) drives one REINFORCE step (Eq. 7) on TrainSize refs drawn
//     uniformly from the history, their features re-read from the buffer
//     and the per-slot store (refs overwritten since are dropped); the
//     history is then emptied.
//
// New items enter with priority 1, the most a score^Alpha can be, so each
// is replayed soon (Priority). Features of an item the learner has not
// reported on are 1.0 for δ, Q and y (App. B).
//
// The history is a reservoir of History refs (Vitter's algorithm R): once
// more refs were sampled since the last update, it holds a uniform sample
// of them, so I_train is still a uniform draw from I_cal while memory
// stays bounded.
//
// Concurrency: Priority and Evaluated may be called from any goroutine;
// Sample, Weights, UpdateFeatures and Update by one goroutine at a time
// (the learner), concurrently with inserts into the buffer. Stats may be
// called from any goroutine.
type NERS struct {
	buf  *buffer.Buffer
	cfg  NERSConfig
	net  *NERSNet
	rng  *rand.Rand // draws of the reservoir and of I_train, from pcg
	pcg  *rand.PCG
	bcfg buffer.Config
	// width is the feature row's width: 2·ObsDim + actW + 5.
	width, actW int

	// Per-slot learner reports (Capacity each). gen[s] is the generation
	// of the item they describe (even; 0 for a slot never reported): a
	// slot whose current generation differs holds a fresh item (features
	// nersFresh).
	td, q, y []float32
	gen      []uint32

	// Running moments of each raw feature over every row scored (for the
	// standardisation), Welford's algorithm.
	momN     float64
	momMean  []float64
	momM2    []float64
	momSaved nersMoments // scratch: the moments before a batch's update
	featRows []float64   // scratch: one batch's raw features

	// last is the batch of the last Sample (UpdateFeatures reads its rows).
	last  *buffer.Batch
	steps int64 // Sample calls

	// History reservoir: hist[:histN] holds refs of stored items (even,
	// non-zero generations); histN <= min(len(hist), seen); seen counts
	// the refs offered since the last update.
	hist  []buffer.Ref
	histN int
	seen  int64
	train *buffer.Batch // I_train's rows

	lastUpdate int64 // the step of the last update (or baseline), <= steps
	baseline   float64
	hasBase    bool

	mu      sync.Mutex
	pending float64 // the latest evaluation not yet consumed
	hasPend bool

	prio []float64 // UpdateFeatures' scratch: the rows' priorities

	statMu sync.Mutex
	stats  NERSStats
}

var (
	_ Selector       = (*NERS)(nil)
	_ Weighter       = (*NERS)(nil)
	_ FeatureUpdater = (*NERS)(nil)
	_ EvaluationHook = (*NERS)(nil)
)

// NewNERS validates cfg and returns a NERS stage over buf, its scorer
// initialised from cfg.Seed. NormalizeBuffer needs the buffer's min tree.
// Memory: about 16 bytes per buffer slot plus the history (8 bytes per
// ref) and the scorer.
func NewNERS(buf *buffer.Buffer, cfg NERSConfig) (*NERS, error) {
	if buf == nil {
		return nil, fmt.Errorf("%w: ners: nil buffer", buffer.ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	bc := buf.Config()
	if cfg.Normalize == buffer.NormalizeBuffer && bc.NoMinTree {
		return nil, fmt.Errorf("%w: ners: NormalizeBuffer needs the buffer's min tree (Config.NoMinTree is set)", buffer.ErrConfig)
	}
	actW := bc.NumActions
	if bc.Action == buffer.Continuous {
		actW = bc.ActionDim
	}
	width := 2*bc.ObsDim + actW + 5
	nc := cfg.Net
	if nc.In != 0 && nc.In != width {
		return nil, fmt.Errorf("%w: ners: Net.In %d, but the buffer's features are %d wide (2·%d observations + %d action + 5)", buffer.ErrConfig, nc.In, width, bc.ObsDim, actW)
	}
	nc.In = width
	pcg := rand.NewPCG(cfg.Seed, 0x4e455253)
	rng := rand.New(pcg)
	net, err := NewNERSNet(nc, rng)
	if err != nil {
		return nil, fmt.Errorf("ners: scorer: %w", err)
	}
	cfg.Net = net.Config()
	train, err := buf.NewBatch(cfg.TrainSize)
	if err != nil {
		return nil, fmt.Errorf("ners: TrainSize: %w", err)
	}
	n := bc.Capacity
	return &NERS{buf: buf, cfg: cfg, net: net, rng: rng, pcg: pcg, bcfg: bc, width: width, actW: actW,
		td: make([]float32, n), q: make([]float32, n), y: make([]float32, n), gen: make([]uint32, n),
		momMean: make([]float64, width), momM2: make([]float64, width),
		hist: make([]buffer.Ref, cfg.History), train: train}, nil
}

// Config returns the stage's configuration with its defaults filled in.
// O(1).
func (s *NERS) Config() NERSConfig { return s.cfg }

// Net returns the scorer (for checkpoints and inspection; not safe to use
// while the learner runs).
func (s *NERS) Net() *NERSNet { return s.net }

// Width is the width of a feature row D(i): 2·ObsDim + the action's width
// (NumActions one-hot, or ActionDim) + 5. O(1).
func (s *NERS) Width() int { return s.width }

// String names the stage and its parameters.
func (s *NERS) String() string {
	c := s.cfg
	return fmt.Sprintf("ners(alpha=%g,beta=%s,norm=%v,interval=%d,n=%d)", c.Alpha, fmtLinear(c.Beta), c.Normalize, c.Interval, c.TrainSize)
}
