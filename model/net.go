package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// MaxParams bounds a network's size (2^28 parameters, 2 GiB of float64
// each for the parameters and the gradients): Config.Validate computes
// the count overflow-safely and refuses a Config beyond it before NewNet
// allocates anything; NewAdam and NewDense apply the same bound.
const MaxParams = 1 << 28

// maxParams is MaxParams, the name the package's code uses.
const maxParams = MaxParams

// maxLayers bounds len(Config.Hidden) and len(Config.StreamHidden): far
// deeper than any MLP this package trains, and small enough that a
// damaged checkpoint header cannot make a loader build (and name) millions
// of one-unit layers.
const maxLayers = 1024

// Config describes a multilayer perceptron: In inputs, the Hidden layers'
// widths, Out outputs, and optionally a dueling head. The zero values of
// Act and OutAct mean the defaults.
//
// Without Dueling the network is In → Hidden[0] → … → Hidden[k-1] → Out,
// every hidden layer with Act and the last with OutAct.
//
// With Dueling (Wang et al. 2016, arXiv:1511.06581) the Hidden layers form
// a shared trunk with output h (h = x when Hidden is empty) that feeds two
// streams, each h → StreamHidden[0] → … → (1 for the value V, Out for the
// advantages A) with Act on the stream's hidden layers and Identity on its
// last; the output is Q = V + A − mean(A) (DuelingCombine). With
// StreamHidden empty each stream is one linear layer on h, the common
// classic-control shape.
type Config struct {
	// In is the observation width (> 0).
	In int `json:"in"`
	// Hidden are the widths of the hidden layers (each > 0; may be empty;
	// at most 1024 layers; the network at most MaxParams parameters).
	Hidden []int `json:"hidden"`
	// Out is the output width, the number of actions for a Q network (> 0).
	Out int `json:"out"`
	// Act is the hidden layers' activation. Default ReLU.
	Act Activation `json:"act"`
	// OutAct is the output layer's activation. Default Identity; a dueling
	// head requires Identity.
	OutAct Activation `json:"out_act"`
	// Dueling selects the dueling head described above.
	Dueling bool `json:"dueling"`
	// StreamHidden are the hidden widths of each dueling stream (each > 0,
	// at most 1024 layers; only with Dueling).
	StreamHidden []int `json:"stream_hidden,omitempty"`
	// Float32 runs the network's batch Forward and Backward (B > 1) on the
	// float32 SIMD kernels of model/internal/f32 instead of gonum's
	// float64 ones: about ten times faster for the learner's batches,
	// to float32 precision. Params, Grads, snapshots and checkpoints stay
	// float64 (the float64 parameters are the master copy, rounded to
	// float32 at each batch Forward); a single row (B = 1, an actor's
	// Forward) is computed in float64 as without it. float32.go states
	// the precision and the cost of every float64 boundary. Pair it with
	// AdamConfig.Float32 for the optimizer. Default false: the float64
	// path, bit for bit as before the option existed.
	Float32 bool `json:"float32,omitempty"`
}

// Validate checks c and returns it with the defaults filled in (Act ReLU,
// OutAct Identity) and its slices copied. Errors wrap ErrConfig and name
// the field.
func (c Config) Validate() (Config, error) {
	c.Hidden = slices.Clone(c.Hidden)
	c.StreamHidden = slices.Clone(c.StreamHidden)
	if c.Act == 0 {
		c.Act = ReLU
	}
	if c.OutAct == 0 {
		c.OutAct = Identity
	}
	switch {
	case c.In <= 0:
		return c, errorf(ErrConfig, "In = %d (must be > 0)", c.In)
	case c.Out <= 0:
		return c, errorf(ErrConfig, "Out = %d (must be > 0)", c.Out)
	case !c.Act.valid():
		return c, errorf(ErrConfig, "Act = %v", c.Act)
	case !c.OutAct.valid():
		return c, errorf(ErrConfig, "OutAct = %v", c.OutAct)
	case c.Dueling && c.OutAct != Identity:
		return c, errorf(ErrConfig, "OutAct = %v with Dueling (the dueling head is linear: leave OutAct unset or Identity)", c.OutAct)
	case !c.Dueling && len(c.StreamHidden) > 0:
		return c, errorf(ErrConfig, "StreamHidden is set without Dueling")
	case len(c.Hidden) > maxLayers:
		return c, errorf(ErrConfig, "Hidden has %d layers (at most %d)", len(c.Hidden), maxLayers)
	case len(c.StreamHidden) > maxLayers:
		return c, errorf(ErrConfig, "StreamHidden has %d layers (at most %d)", len(c.StreamHidden), maxLayers)
	}
	for i, h := range c.Hidden {
		if h <= 0 {
			return c, errorf(ErrConfig, "Hidden[%d] = %d (must be > 0)", i, h)
		}
	}
	for i, h := range c.StreamHidden {
		if h <= 0 {
			return c, errorf(ErrConfig, "StreamHidden[%d] = %d (must be > 0)", i, h)
		}
	}
	if n := c.numParams(); n < 0 || n > maxParams {
		return c, errorf(ErrConfig, "the network would have more than %d parameters", maxParams)
	}
	return c, nil
}

// layerSpec is one Dense layer of a Config, in parameter order.
type layerSpec struct {
	in, out int
	act     Activation
	name    string
}

// layers lists c's Dense layers in parameter order and how many belong to
// the trunk and to the value stream (the rest are the advantage stream).
// c must have its defaults filled in.
func (c Config) layers() (specs []layerSpec, nTrunk, nValue int) {
	add := func(prefix string, widths []int, in, out int, act, last Activation) int {
		for i, w := range widths {
			specs = append(specs, layerSpec{in, w, act, fmt.Sprintf("%s %d", prefix, i)})
			in = w
		}
		if out > 0 {
			specs = append(specs, layerSpec{in, out, last, fmt.Sprintf("%s %d", prefix, len(widths))})
		}
		return in
	}
	if !c.Dueling {
		add("layer", c.Hidden, c.In, c.Out, c.Act, c.OutAct)
		return specs, len(specs), 0
	}
	h := add("trunk", c.Hidden, c.In, 0, c.Act, 0)
	nTrunk = len(specs)
	add("value", c.StreamHidden, h, 1, c.Act, Identity)
	nValue = len(specs) - nTrunk
	add("advantage", c.StreamHidden, h, c.Out, c.Act, Identity)
	return specs, nTrunk, nValue
}

// numParams returns the parameter count, or -1 on overflow.
func (c Config) numParams() int {
	specs, _, _ := c.layers()
	n := 0
	for _, s := range specs {
		if s.in > maxParams || s.out > maxParams || s.in*s.out > maxParams {
			return -1
		}
		n += DenseParams(s.in, s.out)
		if n > maxParams {
			return -1
		}
	}
	return n
}

// Net is a multilayer perceptron (optionally with a dueling head, see
// Config) with hand-written backpropagation. All its parameters live in one
// flat vector (Params) and their gradients in another (Grads), layer by
// layer in the order of Config (trunk, then the value stream, then the
// advantage stream), each layer's W row-major (In×Out) then b. Optimizers,
// target updates, snapshots and checkpoints work on those flat vectors.
//
// The usual learner step is Forward, a loss (Loss.Selected for Q-learning),
// Backward, then an optimizer's Step on Params and Grads. Forward keeps
// references for Backward: a second Forward (for example on next
// observations) replaces them, so run those before the training Forward,
// or on a Clone.
//
// A Net is not safe for concurrent use, not even two Forwards: each
// goroutine (the learner, every actor) owns its own Net and they share
// parameters through a Store of immutable Params. After warm-up (the first
// call at the largest batch) Forward, Backward, SetParams, CopyFrom and
// SoftUpdate do not allocate; nothing in a Net starts a goroutine.
type Net struct {
	cfg    Config
	params []float64
	grads  []float64
	layers []Dense // trunk, value stream, advantage stream
	nTrunk int
	nValue int

	batch int       // rows of the last Forward (0: none yet)
	xin   []float64 // Forward32 conversion
	q     []float64 // dueling output, B×Out
	dv    []float64 // dueling dL/dV, B
	da    []float64 // dueling dL/dA, B×Out
	dh    []float64 // dueling: sum of both streams' dL/dh

	f32 *net32 // the float32 path (Config.Float32), nil without it
}

// NewNet builds the network cfg describes and initializes every layer with
// Glorot uniform weights and zero biases, drawing from rng layer by layer
// (the same seed gives the same network). A nil rng leaves every parameter
// 0: use that for a network whose parameters will come from SetParams or
// CopyFrom (an actor's copy). Errors wrap ErrConfig.
//
// Cost: O(parameters) time and memory (parameters and gradients, 16 bytes
// per parameter, and as much again for the transposed copies of layers at
// least four times narrower than their input: at most 32 bytes per
// parameter, so at most 8 GiB under MaxParams; Config.Float32 adds float32
// parameters, gradients and transpose scratch, at most 16 bytes per
// parameter); activation buffers are allocated by the first Forward.
func NewNet(cfg Config, rng *rand.Rand) (*Net, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	specs, nTrunk, nValue := cfg.layers()
	n := &Net{cfg: cfg, nTrunk: nTrunk, nValue: nValue}
	total := cfg.numParams()
	n.params = make([]float64, total)
	n.grads = make([]float64, total)
	n.layers = make([]Dense, len(specs))
	off := 0
	for i, s := range specs {
		l := &n.layers[i]
		if err := l.init(s.in, s.out, s.act, n.params[off:], n.grads[off:]); err != nil {
			return nil, err // not reached: cfg.Validate bounds every layer
		}
		l.name, l.off = s.name, off
		if rng != nil {
			l.InitGlorot(rng)
		}
		off += DenseParams(s.in, s.out)
	}
	if cfg.Float32 {
		n.f32 = newNet32(n)
	}
	return n, nil
}

// Config returns the network's configuration with defaults filled in (a
// copy).
func (n *Net) Config() Config {
	c := n.cfg
	c.Hidden = slices.Clone(c.Hidden)
	c.StreamHidden = slices.Clone(c.StreamHidden)
	return c
}

// In returns the input width.
func (n *Net) In() int { return n.cfg.In }

// Out returns the output width.
func (n *Net) Out() int { return n.cfg.Out }

// NumParams returns the number of parameters.
func (n *Net) NumParams() int { return len(n.params) }

// Params returns the live flat parameter vector (not a copy): optimizers
// update it in place. Use Snapshot for a copy to share.
func (n *Net) Params() []float64 { return n.params }

// Grads returns the live flat gradient vector, aligned with Params, as set
// by the last Backward.
func (n *Net) Grads() []float64 { return n.grads }

// Forward computes the network's outputs for the B = len(x)/In rows of x
// (row-major) and returns them (B×Out, row-major), in a buffer the Net owns
// that is valid until the next Forward. x must stay unchanged until the
// matching Backward. It panics if len(x) is not a positive multiple of In.
//
// Cost: one gemv per layer when B = 1 (the actor's path: about 1 µs for
// 4→64→64→2), one GEMM per layer otherwise (2·B·params flops); the dueling
// combination adds O(B·Out). No allocation after warm-up.
func (n *Net) Forward(x []float64) []float64 {
	n.batch = batchOf(len(x), n.cfg.In)
	if n.f32 != nil {
		if n.batch > 1 {
			n.f32.x32 = grow32(n.f32.x32, len(x))
			round32(n.f32.x32, x)
			return n.forward32(n.f32.x32)
		}
		n.f32.on = false
	}
	h := x
	for i := range n.nTrunk {
		h = n.layers[i].Forward(h)
	}
	if !n.cfg.Dueling {
		return h
	}
	v := forwardStream(n.valueLayers(), h)
	a := forwardStream(n.advantageLayers(), h)
	n.q = grow(n.q, n.batch*n.cfg.Out)
	DuelingCombine(n.q, v, a)
	return n.q
}

// Forward32 is Forward for float32 observations (the replay buffer's
// storage type): it converts x into a buffer the Net owns, then runs
// Forward. Cost: Forward plus O(len(x)). On the float32 path
// (Config.Float32, B > 1) x goes to the kernels as it is, unconverted, and
// must then stay unchanged until the matching Backward.
func (n *Net) Forward32(x []float32) []float64 {
	if n.f32 != nil && len(x) > n.cfg.In {
		n.batch = batchOf(len(x), n.cfg.In)
		return n.forward32(x)
	}
	n.xin = grow(n.xin, len(x))
	for i, v := range x {
		n.xin[i] = float64(v)
	}
	return n.Forward(n.xin)
}

// Backward takes dOut = dL/dOutput for the batch of the last Forward
// (B×Out) and sets Grads to dL/dParams. Gradients are overwritten, not
// accumulated. dOut is not modified. It panics if there was no Forward or
// len(dOut) does not match it.
//
// Cost: about twice Forward's flops (the first layer skips its input
// gradient). No allocation after warm-up.
func (n *Net) Backward(dOut []float64) { n.backward(dOut, false) }

// BackwardInput is Backward that also returns dL/dx (B×In) for the input of
// the last Forward, in a buffer the Net owns, valid until the next
// backward pass: a deterministic policy gradient (TD3) backpropagates a
// critic's dQ/daction this way. Cost: Backward plus one GEMM of the first
// layer.
func (n *Net) BackwardInput(dOut []float64) []float64 { return n.backward(dOut, true) }

func (n *Net) backward(dOut []float64, wantDX bool) []float64 {
	if n.batch == 0 || len(dOut) != n.batch*n.cfg.Out {
		panic(fmt.Sprintf("model: Net.Backward: len(dOut) = %d, the last Forward produced %d outputs", len(dOut), n.batch*n.cfg.Out))
	}
	if n.f32 != nil && n.f32.on {
		return n.backward32(dOut, wantDX)
	}
	g := dOut
	if n.cfg.Dueling {
		n.dv = grow(n.dv, n.batch)
		n.da = grow(n.da, len(dOut))
		DuelingBackward(n.dv, n.da, dOut)
		gv := backwardStream(n.valueLayers(), n.dv)
		ga := backwardStream(n.advantageLayers(), n.da)
		n.dh = grow(n.dh, len(gv))
		copy(n.dh, gv)
		for i, x := range ga {
			n.dh[i] += x
		}
		g = n.dh
	}
	for i := n.nTrunk - 1; i >= 0; i-- {
		g = n.layers[i].Backward(g, i > 0 || wantDX)
	}
	if !wantDX {
		return nil
	}
	return g
}

func (n *Net) valueLayers() []Dense { return n.layers[n.nTrunk : n.nTrunk+n.nValue] }

func (n *Net) advantageLayers() []Dense { return n.layers[n.nTrunk+n.nValue:] }

func forwardStream(ls []Dense, h []float64) []float64 {
	for i := range ls {
		h = ls[i].Forward(h)
	}
	return h
}

// backwardStream backpropagates g through ls and returns dL/d(stream
// input).
func backwardStream(ls []Dense, g []float64) []float64 {
	for i := len(ls) - 1; i >= 0; i-- {
		g = ls[i].Backward(g, true)
	}
	return g
}

// Clone returns a new Net with the same configuration and parameters and
// fresh buffers (for a target network or an actor's copy). Cost:
// O(parameters), allocates.
func (n *Net) Clone() *Net {
	c, err := NewNet(n.cfg, nil)
	if err != nil {
		panic("model: Clone: " + err.Error()) // n.cfg was validated
	}
	copy(c.params, n.params)
	return c
}

// SameShape reports whether n and o have the same layers (and so
// interchangeable parameter vectors).
func (n *Net) SameShape(o *Net) bool {
	if len(n.layers) != len(o.layers) || n.cfg.Dueling != o.cfg.Dueling || n.nTrunk != o.nTrunk {
		return false
	}
	for i := range n.layers {
		a, b := &n.layers[i], &o.layers[i]
		if a.in != b.in || a.out != b.out || a.act != b.act {
			return false
		}
	}
	return true
}

// CopyFrom sets n's parameters to src's: the hard target update
// θ_target ← θ. Cost O(parameters), no allocation. It panics unless
// n.SameShape(src).
func (n *Net) CopyFrom(src *Net) {
	n.mustMatch(src, "CopyFrom")
	copy(n.params, src.params)
}

// SoftUpdate moves n's parameters toward src's (Polyak averaging, as in
// DDPG/TD3): θ_target ← τ·θ + (1−τ)·θ_target, see Polyak. Cost
// O(parameters), no allocation. It panics unless n.SameShape(src) and
// 0 ≤ tau ≤ 1.
func (n *Net) SoftUpdate(src *Net, tau float64) {
	n.mustMatch(src, "SoftUpdate")
	Polyak(n.params, src.params, tau)
}

func (n *Net) mustMatch(o *Net, op string) {
	if !n.SameShape(o) {
		panic(fmt.Sprintf("model: %s between networks of different shapes (%d and %d parameters)", op, len(n.params), len(o.params)))
	}
}

// Polyak sets dst[i] = tau·src[i] + (1−tau)·dst[i], the soft target update
// on flat parameter vectors. tau = 1 is a hard copy, tau = 0 leaves dst.
// It panics if the lengths differ or tau is outside [0, 1].
func Polyak(dst, src []float64, tau float64) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("model: Polyak: len(dst) = %d, len(src) = %d", len(dst), len(src)))
	}
	if !(tau >= 0 && tau <= 1) {
		panic(fmt.Sprintf("model: Polyak: tau = %g (must be in [0, 1])", tau))
	}
	keep := 1 - tau
	for i, s := range src {
		dst[i] = tau*s + keep*dst[i]
	}
}

// Where describes the parameter at flat index i, for error messages: for
// example "layer 1 W[3,5]", "trunk 0 b[7]" or "advantage 0 W[63,1]".
func (n *Net) Where(i int) string {
	if i < 0 || i >= len(n.params) {
		return fmt.Sprintf("index %d outside the %d parameters", i, len(n.params))
	}
	for k := range n.layers {
		l := &n.layers[k]
		j := i - l.off
		if j < 0 || j >= DenseParams(l.in, l.out) {
			continue
		}
		if j < l.in*l.out {
			return fmt.Sprintf("%s W[%d,%d]", l.name, j/l.out, j%l.out)
		}
		return fmt.Sprintf("%s b[%d]", l.name, j-l.in*l.out)
	}
	panic("model: Where: layout does not cover the parameters")
}

// CheckFinite returns nil if every parameter is finite, and otherwise a
// *NonFiniteError (wrapping ErrNonFinite) naming the first bad parameter,
// its index and its place (Where). Cost O(parameters), about 1 ns each.
func (n *Net) CheckFinite() error {
	if i := firstNonFinite(n.params); i >= 0 {
		return &NonFiniteError{What: "params", Index: i, Where: n.Where(i), Value: n.params[i]}
	}
	return nil
}

// CheckGrads is CheckFinite for Grads (What "gradient").
func (n *Net) CheckGrads() error {
	if i := firstNonFinite(n.grads); i >= 0 {
		return &NonFiniteError{What: "gradient", Index: i, Where: n.Where(i), Value: n.grads[i]}
	}
	return nil
}

// Argmax returns the index of the largest value in q (the first on ties),
// the greedy action of a Q row; NaNs are never chosen unless every value is
// NaN (then 0). It panics on an empty q.
func Argmax(q []float64) int {
	if len(q) == 0 {
		panic("model: Argmax of an empty slice")
	}
	best := 0
	for i := 1; i < len(q); i++ {
		if v := q[i]; v > q[best] || (q[best] != q[best] && v == v) {
			best = i
		}
	}
	return best
}
