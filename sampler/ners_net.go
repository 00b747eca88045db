package sampler

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
)

// NERS scorer default widths, a reduced version of the authors' code
// (in-128-256-128-64 for f_l and f_g, 128-128-64-1 for f_s; design note
// §2.3), sized for the low-dimensional feature rows this runtime feeds.
// Unexported so no caller can change them; DefaultNERSNetConfig returns
// copies.
var (
	nersDefaultLocal  = []int{64, 32} // f_l, the last entry d_l
	nersDefaultGlobal = []int{64, 32} // f_g, the last entry d_g
	nersDefaultScore  = []int{64}     // f_s's hidden layers (output width 1)
)

const (
	// DefaultNERSFloor is the smallest score: σ = Floor + (1−Floor)·sigmoid.
	DefaultNERSFloor = 1e-3
	// DefaultNERSLR is the Adam step size of Reinforce (Table B.1).
	DefaultNERSLR = 1e-4
	// nersLogEps is added to σ inside the log of the REINFORCE loss, as in
	// the authors' code.
	nersLogEps = 1e-6
)

// NERSNetConfig configures NERSNet. Zero values (and empty width slices)
// take the defaults; In has none.
type NERSNetConfig struct {
	// In is the feature width of a row (> 0).
	In int
	// Local are f_l's layer widths: ReLU hidden layers, then a linear
	// output of width d_l = the last entry. Each > 0. Default [64, 32].
	Local []int
	// Global are f_g's layer widths, same convention (d_g = the last
	// entry). Each > 0; ignored with NoGlobal. Default [64, 32].
	Global []int
	// Score are f_s's ReLU hidden widths; its output is one linear unit.
	// Each > 0. Default [64].
	Score []int
	// NoGlobal drops f_g: f_s sees f_l(x_i) only, so an item's score does
	// not depend on the rest of its batch (the paper's "no global context"
	// ablation, Fig. 4).
	NoGlobal bool
	// Floor is the smallest score, in (0, 1): σ = Floor + (1−Floor)·
	// sigmoid(f_s), so every item stays sampleable even when the sigmoid
	// underflows (design note §6 item 4). Default 1e-3.
	Floor float64
	// LR is the Adam step size of Reinforce (finite, > 0). Default 1e-4
	// (the paper's Table B.1).
	LR float64
}

// DefaultNERSNetConfig returns the defaults for feature rows of width in.
func DefaultNERSNetConfig(in int) NERSNetConfig {
	return NERSNetConfig{In: in}.withDefaults()
}

// withDefaults fills in the zero fields and copies the slices.
func (c NERSNetConfig) withDefaults() NERSNetConfig {
	def := func(w, d []int) []int {
		if len(w) == 0 {
			return slices.Clone(d)
		}
		return slices.Clone(w)
	}
	c.Local = def(c.Local, nersDefaultLocal)
	c.Global = def(c.Global, nersDefaultGlobal)
	c.Score = def(c.Score, nersDefaultScore)
	if c.Floor == 0 {
		c.Floor = DefaultNERSFloor
	}
	if c.LR == 0 {
		c.LR = DefaultNERSLR
	}
	return c
}

// Validate reports the first field out of range (after the defaults are
// filled in), wrapping buffer.ErrConfig and naming the field. O(widths).
func (c NERSNetConfig) Validate() error {
	c = c.withDefaults()
	if c.In <= 0 {
		return fmt.Errorf("%w: ners: In = %d (must be > 0)", buffer.ErrConfig, c.In)
	}
	widths := func(name string, w []int) error {
		for i, v := range w {
			if v <= 0 {
				return fmt.Errorf("%w: ners: %s[%d] = %d (must be > 0)", buffer.ErrConfig, name, i, v)
			}
		}
		return nil
	}
	if err := widths("Local", c.Local); err != nil {
		return err
	}
	if !c.NoGlobal {
		if err := widths("Global", c.Global); err != nil {
			return err
		}
	}
	if err := widths("Score", c.Score); err != nil {
		return err
	}
	if !(c.Floor > 0 && c.Floor < 1) {
		return fmt.Errorf("%w: ners: Floor = %v (must be in (0, 1))", buffer.ErrConfig, c.Floor)
	}
	if !(c.LR > 0) || math.IsInf(c.LR, 1) {
		return fmt.Errorf("%w: ners: LR = %v (must be finite and > 0)", buffer.ErrConfig, c.LR)
	}
	return nil
}

// nersMLP returns the model.Config of an MLP in → widths (ReLU hidden, linear
// output of width widths[len-1]).
func nersMLP(in int, widths []int) model.Config {
	k := len(widths) - 1
	return model.Config{In: in, Hidden: widths[:k], Out: widths[k], Act: model.ReLU, OutAct: model.Identity}
}

// NERSNet is the scorer of Neural Experience Replay Sampler (Oh et al.,
// ICLR 2021, arXiv:2007.07358, Eqs. 3, 4 and 7). For a batch of m feature
// rows x_1…x_m it computes
//
//	g   = (1/m)·Σ_j f_g(x_j)                       (global context)
//	z_i = [f_l(x_i), g]                            (Eq. 3)
//	σ_i = Floor + (1−Floor)·sigmoid(f_s(z_i))      (Eq. 4)
//
// with f_l, f_g and f_s row-wise shared MLPs, so the scores are
// permutation-equivariant and items interact only through the mean g
// (NoGlobal drops g). Every σ_i is in (0, 1], at least Floor.
//
// Reinforce is the paper's update: one Adam step per subnet on the
// REINFORCE loss L = −r_re·(1/m)·Σ_i log(σ_i + 1e-6), Eq. 7 as the authors'
// code computes it (the raw score in place of p_i, design note §6 item 5).
//
// A NERSNet holds no goroutine, clock or RNG of its own (the RNG of
// NewNERSNet only initializes the weights). It is not safe for concurrent
// use: one goroutine at a time calls its methods, and the buffers it returns
// belong to it. After warm-up (the first call at the largest batch)
// Scores, Backward and Reinforce do not allocate.
type NERSNet struct {
	cfg        NERSNetConfig
	fl, fg, fs *model.Net // fg is nil with NoGlobal
	opt        []*model.Adam
	params     [][]float64 // f_l, f_g, f_s (f_g absent with NoGlobal)
	grads      [][]float64
	where      []string // subnet names, aligned with params
	dl, dg     int      // widths of f_l's and f_g's outputs (dg = 0 with NoGlobal)

	m      int       // rows of the last Scores (0: none yet)
	g      []float64 // mean of f_g's outputs, dg
	z      []float64 // f_s input, m×(dl+dg)
	sig    []float64 // sigmoid(f_s output), m
	scores []float64 // σ, m
	dout   []float64 // dL/d f_s output, m
	dhl    []float64 // dL/d f_l output, m×dl
	dhg    []float64 // dL/d f_g output, m×dg
	dsc    []float64 // Reinforce's dL/dσ, m
}

// NewNERSNet builds the scorer cfg describes (zero fields take the
// defaults) with Glorot-uniform weights and zero biases drawn from rng in
// the order f_l, f_g, f_s (the same seed gives the same network), and one
// Adam (step cfg.LR, otherwise Kingma & Ba's defaults) per subnet. A nil
// rng leaves every parameter 0, for a network whose parameters will be
// restored through Params. Errors wrap buffer.ErrConfig.
//
// Cost: O(parameters) time and memory (parameters, gradients and two Adam
// moments: 32 bytes per parameter); activation buffers come with the first
// Scores.
func NewNERSNet(cfg NERSNetConfig, rng *rand.Rand) (*NERSNet, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &NERSNet{cfg: cfg, dl: cfg.Local[len(cfg.Local)-1]}
	var err error
	wrap := func(name string, e error) error {
		return fmt.Errorf("%w: ners: %s: %v", buffer.ErrConfig, name, e)
	}
	add := func(name string, net *model.Net) error {
		a, e := model.NewAdam(net.NumParams(), model.AdamConfig{LR: cfg.LR})
		if e != nil {
			return wrap(name, e)
		}
		n.opt = append(n.opt, a)
		n.params = append(n.params, net.Params())
		n.grads = append(n.grads, net.Grads())
		n.where = append(n.where, name)
		return nil
	}
	if n.fl, err = model.NewNet(nersMLP(cfg.In, cfg.Local), rng); err != nil {
		return nil, wrap("Local", err)
	}
	if err = add("f_l", n.fl); err != nil {
		return nil, err
	}
	if !cfg.NoGlobal {
		n.dg = cfg.Global[len(cfg.Global)-1]
		if n.fg, err = model.NewNet(nersMLP(cfg.In, cfg.Global), rng); err != nil {
			return nil, wrap("Global", err)
		}
		if err = add("f_g", n.fg); err != nil {
			return nil, err
		}
	}
	if n.fs, err = model.NewNet(nersMLP(n.dl+n.dg, append(slices.Clone(cfg.Score), 1)), rng); err != nil {
		return nil, wrap("Score", err)
	}
	if err = add("f_s", n.fs); err != nil {
		return nil, err
	}
	n.params = slices.Clip(n.params)
	n.grads = slices.Clip(n.grads)
	return n, nil
}

// Config returns the configuration with the defaults filled in (a copy).
// O(widths).
func (n *NERSNet) Config() NERSNetConfig {
	c := n.cfg
	c.Local = slices.Clone(c.Local)
	c.Global = slices.Clone(c.Global)
	c.Score = slices.Clone(c.Score)
	return c
}

// Scores returns the scores σ_1…σ_m of the m = len(x)/In feature rows of
// x (row-major), each in (0, 1] and at least Floor, in a buffer n owns that
// is valid until the next Scores or Reinforce. x must stay unchanged until
// the matching Backward. It panics if len(x) is not a positive multiple of
// In. A NaN in x gives NaN scores.
//
// Cost: one forward pass of f_l and f_s (and f_g) over the m rows, about
// 2·m·NumParams flops plus O(m·(d_l+d_g)): about 0.8 ms for m = 256, In =
// 10 and the default widths (BenchmarkNERSNetScores, gonum, one core). No
// allocation after warm-up.
func (n *NERSNet) Scores(x []float64) []float64 {
	in := n.cfg.In
	if len(x) == 0 || len(x)%in != 0 {
		panic(fmt.Sprintf("sampler: NERSNet.Scores: len(x) = %d is not a positive multiple of In = %d", len(x), in))
	}
	m := len(x) / in
	n.m = m
	hl := n.fl.Forward(x)
	w := n.dl + n.dg
	n.z = grow(n.z, m*w)
	for i := range m {
		copy(n.z[i*w:i*w+n.dl], hl[i*n.dl:(i+1)*n.dl])
	}
	if n.fg != nil {
		hg := n.fg.Forward(x)
		n.g = grow(n.g, n.dg)
		copy(n.g, hg[:n.dg])
		for j := 1; j < m; j++ {
			for k, v := range hg[j*n.dg : (j+1)*n.dg] {
				n.g[k] += v
			}
		}
		inv := 1 / float64(m)
		for k := range n.g {
			n.g[k] *= inv
		}
		for i := range m {
			copy(n.z[i*w+n.dl:(i+1)*w], n.g)
		}
	}
	out := n.fs.Forward(n.z)
	n.sig = grow(n.sig, m)
	n.scores = grow(n.scores, m)
	floor := n.cfg.Floor
	for i, o := range out {
		s := model.Sigmoid(o)
		n.sig[i] = s
		n.scores[i] = min(floor+(1-floor)*s, 1)
	}
	return n.scores
}

// Backward takes dScores = dL/dσ for the batch of the last Scores (m
// values) and sets every subnet's Grads to dL/dParams, overwriting them.
// The gradient reaches f_g through the mean: every row j of f_g's output
// gets dL/d f_g(x_j) = (1/m)·Σ_i dL/dg|_i, where dL/dg|_i is the g-part of
// dL/dz_i. dScores is not modified. It panics if there was no Scores or
// len(dScores) differs from its m.
//
// Cost: about twice Scores's flops. No allocation after warm-up.
func (n *NERSNet) Backward(dScores []float64) {
	m := n.m
	if m == 0 || len(dScores) != m {
		panic(fmt.Sprintf("sampler: NERSNet.Backward: len(dScores) = %d, the last Scores scored %d rows", len(dScores), m))
	}
	scale := 1 - n.cfg.Floor
	n.dout = grow(n.dout, m)
	for i, d := range dScores {
		s := n.sig[i]
		n.dout[i] = d * scale * s * (1 - s)
	}
	dz := n.fs.BackwardInput(n.dout)
	w := n.dl + n.dg
	n.dhl = grow(n.dhl, m*n.dl)
	for i := range m {
		copy(n.dhl[i*n.dl:(i+1)*n.dl], dz[i*w:i*w+n.dl])
	}
	n.fl.Backward(n.dhl)
	if n.fg == nil {
		return
	}
	// Σ_i dL/dg|_i into row 0, scaled by 1/m, then copied to every row.
	n.dhg = grow(n.dhg, m*n.dg)
	row := n.dhg[:n.dg]
	copy(row, dz[n.dl:w])
	for i := 1; i < m; i++ {
		for k, v := range dz[i*w+n.dl : (i+1)*w] {
			row[k] += v
		}
	}
	inv := 1 / float64(m)
	for k := range row {
		row[k] *= inv
	}
	for j := 1; j < m; j++ {
		copy(n.dhg[j*n.dg:(j+1)*n.dg], row)
	}
	n.fg.Backward(n.dhg)
}

// Reinforce applies one REINFORCE step for the batch x (as Scores takes
// it) and the replay reward r_re = reward: it scores x, takes
// L = −reward·(1/m)·Σ_i log(σ_i + 1e-6), backpropagates it (Backward) and
// applies one Adam step to each subnet. It returns L. A positive reward
// raises the scores of the batch's items, a negative one lowers them.
// The loss has no baseline (as in the paper): a long run of negative
// rewards lowers every score toward Floor, where the sigmoid's gradient
// vanishes and sampling is uniform, so feed rewards that are centred, as
// r_re (return now − return at the previous evaluation) is.
//
// A non-finite reward, loss or gradient returns an error wrapping
// model.ErrNonFinite (a *model.NonFiniteError naming the subnet) and
// applies nothing: every gradient is checked before the first step. It
// panics like Scores on a malformed x. Afterwards the scores buffer holds
// the scores before the step.
//
// Cost: Scores, Backward, then O(NumParams) for the checks and the Adam
// steps. No allocation after warm-up.
func (n *NERSNet) Reinforce(x []float64, reward float64) (loss float64, err error) {
	if err := model.CheckFiniteValue("ners reward", reward); err != nil {
		return math.NaN(), err
	}
	sc := n.Scores(x)
	n.dsc = grow(n.dsc, len(sc))
	return n.applyLoss(nersLogLoss(sc, reward, n.dsc))
}

// ReinforceNormalized is Reinforce with Eq. 7's probabilities normalised
// within the batch, the variant per-ners.md §6.5 offers next to the
// official code's log σ: L = −reward·(1/m)·Σ_i log p_i with
// p_i = σ_i^alpha / Σ_k σ_k^alpha, the probability of row i were the
// batch the whole buffer. Only the scores' relative sizes matter then: a
// positive reward sharpens the batch's distribution toward the items it
// already favours, a negative one flattens it. alpha must be finite and
// > 0 (the stage's Alpha); errors and cost as Reinforce.
func (n *NERSNet) ReinforceNormalized(x []float64, reward, alpha float64) (loss float64, err error) {
	if err := model.CheckFiniteValue("ners reward", reward); err != nil {
		return math.NaN(), err
	}
	if !(alpha > 0) || math.IsInf(alpha, 1) {
		return math.NaN(), fmt.Errorf("%w: ners: ReinforceNormalized needs a finite alpha > 0, got %v", buffer.ErrConfig, alpha)
	}
	sc := n.Scores(x)
	n.dsc = grow(n.dsc, len(sc))
	return n.applyLoss(nersNormalizedLoss(sc, reward, alpha, n.dsc))
}

// nersLogLoss is the official code's REINFORCE loss over scores sc,
// −reward·mean log(σ + 1e-6), and writes dL/dσ into dsc. O(len(sc)).
func nersLogLoss(sc []float64, reward float64, dsc []float64) float64 {
	inv := 1 / float64(len(sc))
	var sum float64
	for i, s := range sc {
		sum += math.Log(s + nersLogEps)
		dsc[i] = -reward * inv / (s + nersLogEps)
	}
	return -reward * sum * inv
}

// nersNormalizedLoss is −reward·mean_i log(σ_i^alpha / Σ_k σ_k^alpha) over
// scores sc (each > 0), writing dL/dσ_j = −(reward·alpha/m)·(1/σ_j −
// m·σ_j^(alpha−1)/S), S = Σ_k σ_k^alpha, into dsc. O(len(sc)).
func nersNormalizedLoss(sc []float64, reward, alpha float64, dsc []float64) float64 {
	m := float64(len(sc))
	var S, sumLog float64
	for _, s := range sc {
		S += math.Pow(s, alpha)
		sumLog += math.Log(s)
	}
	for j, s := range sc {
		dsc[j] = -reward * alpha / m * (1/s - m*math.Pow(s, alpha-1)/S)
	}
	return -reward * (alpha*sumLog/m - math.Log(S))
}

// applyLoss backpropagates dL/dσ (n.dsc) for the last Scores and takes
// one Adam step per subnet, refusing a non-finite loss or gradient with
// nothing applied (see Reinforce). It returns loss.
func (n *NERSNet) applyLoss(loss float64) (float64, error) {
	if err := model.CheckFiniteValue("ners loss", loss); err != nil {
		return loss, err
	}
	n.Backward(n.dsc[:n.m])
	for k, g := range n.grads {
		if err := model.CheckFinite("gradient", g); err != nil {
			if nf, ok := err.(*model.NonFiniteError); ok {
				nf.Where = "NERS " + n.where[k]
			}
			return loss, err
		}
	}
	for k, a := range n.opt {
		if _, err := a.Step(n.params[k], n.grads[k]); err != nil {
			return loss, fmt.Errorf("sampler: NERS %s: %w", n.where[k], err)
		}
	}
	return loss, nil
}

// NumParams returns the number of parameters of all subnets. O(subnets).
func (n *NERSNet) NumParams() int {
	t := 0
	for _, p := range n.params {
		t += len(p)
	}
	return t
}

// Params returns the subnets' live parameter vectors (not copies), in the
// order f_l, f_g, f_s (f_g absent with NoGlobal), each laid out as
// model.Net.Params. Writing into them changes the network; the outer slice
// belongs to n and must not be modified. O(1), no allocation.
func (n *NERSNet) Params() [][]float64 { return n.params }

// Grads returns the subnets' live gradient vectors, aligned with Params, as
// set by the last Backward or Reinforce. O(1), no allocation.
func (n *NERSNet) Grads() [][]float64 { return n.grads }

// Save writes the subnets' parameters and their optimizers' states
// (model.Net.Save and model.Adam.Save, each its own checkpoint section), in the
// order f_l, f_g, f_s. Cost: O(NumParams).
func (n *NERSNet) Save(w io.Writer) error {
	if w == nil {
		return fmt.Errorf("%w: ners: Save to a nil io.Writer", buffer.ErrNil)
	}
	for i := range n.params {
		if err := n.subnet(i).Save(w); err != nil {
			return err
		}
		if err := n.opt[i].Save(w); err != nil {
			return err
		}
	}
	return nil
}

// Load restores what Save wrote into n, which must have the same
// configuration: the next Reinforce continues the saved run bit for bit.
// A stream of another shape is an error wrapping buffer.ErrConfig; a
// damaged one (a NaN or infinite parameter or Adam moment included) the
// model package's error (model.ErrCorrupt), naming the subnet and the
// field. n is unchanged on error. Memory is bounded as model.LoadNet and
// model.LoadAdam bound it; cost O(NumParams).
func (n *NERSNet) Load(r io.Reader) error {
	if r == nil {
		return fmt.Errorf("%w: ners: Load from a nil io.Reader", buffer.ErrNil)
	}
	commit, err := n.load(r)
	if err != nil {
		return err
	}
	commit()
	return nil
}

// load reads and checks what Save wrote and returns the function that
// puts it into n; n is not changed until it runs.
func (n *NERSNet) load(r io.Reader) (func(), error) {
	nets := make([]*model.Net, len(n.params))
	opts := make([]*model.Adam, len(n.params))
	for i := range n.params {
		var err error
		if nets[i], err = model.LoadNet(r); err != nil {
			return nil, fmt.Errorf("ners scorer: %s: %w", n.where[i], err)
		}
		if !nets[i].SameShape(n.subnet(i)) {
			return nil, fmt.Errorf("%w: ners scorer: saved %s has another shape", buffer.ErrConfig, n.where[i])
		}
		if opts[i], err = model.LoadAdam(r); err != nil {
			return nil, fmt.Errorf("ners scorer: optimizer of %s: %w", n.where[i], err)
		}
		if opts[i].Len() != len(n.params[i]) {
			return nil, fmt.Errorf("%w: ners scorer: saved optimizer of %s has %d moments, want %d", buffer.ErrConfig, n.where[i], opts[i].Len(), len(n.params[i]))
		}
	}
	return func() {
		for i := range n.params {
			n.subnet(i).CopyFrom(nets[i])
			n.opt[i] = opts[i]
		}
	}, nil
}

// subnet is the i-th subnet in Params order.
func (n *NERSNet) subnet(i int) *model.Net {
	if i == 0 {
		return n.fl
	}
	if i == len(n.params)-1 {
		return n.fs
	}
	return n.fg
}
