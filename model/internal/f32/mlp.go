package f32

import (
	"fmt"
	"math"
)

// Act is a layer's activation. Its values are model.Activation's, so a
// model.Config's activations convert by a cast.
type Act uint8

const (
	// Identity: y = z.
	Identity Act = 1
	// ReLU: y = max(z, 0), fused into the forward GEMM's store; its
	// derivative [y > 0] is fused into the backward GEMM's.
	ReLU Act = 2
	// Tanh: y = tanh(z), applied after the forward GEMM (in Go, through
	// float64 math.Tanh); its derivative 1 − y² is fused into the backward
	// GEMM.
	Tanh Act = 3
	// Softsign: y = z/(1 + |z|), with derivative (1 − |y|)²; both are Go
	// loops after the GEMMs (no fused epilogue).
	Softsign Act = 4
)

func (a Act) String() string {
	switch a {
	case Identity:
		return "identity"
	case ReLU:
		return "relu"
	case Tanh:
		return "tanh"
	case Softsign:
		return "softsign"
	}
	return fmt.Sprintf("Act(%d)", uint8(a))
}

// gradPost is the Gemm epilogue that multiplies a gradient by a's
// derivative, written from the layer's output (PostNone for Softsign,
// whose derivative backward applies with softsignGrad).
func (a Act) gradPost() Post {
	switch a {
	case ReLU:
		return PostReLUGrad
	case Tanh:
		return PostTanhGrad
	}
	return PostNone
}

// Layer is one dense layer y = act(x·W + b) from In to Out units.
type Layer struct {
	In, Out int
	Act     Act
}

// Bounds of a narrow layer (see MLP.narrow): a vector of 16 lanes would
// carry at most narrowOut columns, and the transposition pays off over at
// least narrowIn inputs.
const (
	narrowOut = 4
	narrowIn  = 16
)

// maxParams bounds an MLP as model.MaxParams bounds a model.Net.
const maxParams = 1 << 28

// NumParams returns the parameter count of the layers, In·Out + Out each,
// or -1 if it exceeds 2^28 or a size is not positive.
func NumParams(layers []Layer) int {
	n := 0
	for _, l := range layers {
		if l.In <= 0 || l.Out <= 0 || l.In > maxParams || l.Out > maxParams || l.In*l.Out > maxParams {
			return -1
		}
		n += l.In*l.Out + l.Out
		if n > maxParams {
			return -1
		}
	}
	return n
}

// MLP is a float32 multilayer perceptron with hand-written
// backpropagation on the package's kernels. Its parameters are one flat
// vector in model.Net's layout (layer by layer, each W row-major In×Out,
// then b), and so are its gradients: a non-dueling model.Net's Params
// converts element by element.
//
// Forward keeps a reference to its input for Backward, so the input must
// not change between the two. Activation buffers grow to the largest
// batch seen; after that neither call allocates. An MLP is not safe for
// concurrent use and starts no goroutine.
type MLP struct {
	impl   Impl
	layers []Layer
	offs   []int // offset of each layer's W in params
	params []float32
	grads  []float32

	// A narrow layer (Out ≤ narrowOut, In ≥ narrowIn: a Q head, a critic's
	// single output) runs its forward and dW transposed, so the Gemm's
	// long side is the batch or In instead of Out's few lanes.
	narrow []bool
	xt     []float32 // Xᵀ (In×B) of a narrow layer's input
	yt     []float32 // a narrow layer's output transposed (Out×B)
	gwt    []float32 // a narrow layer's dWᵀ (Out×In)

	x     []float32   // the last Forward's input (the caller's)
	y     [][]float32 // each layer's output, B×Out
	dz    [][]float32 // each layer's dL/d(pre-activation), B×Out
	dx    []float32   // BackwardInput's dL/dx, B×In
	wt    []float32   // Wᵀ scratch for dX, Out×In of the largest layer
	batch int         // rows of the last Forward, 0 before the first
}

// NewMLP returns an MLP of the given layers (each layer's In equal to the
// previous Out) computing with impl (Auto: the best the CPU has), its
// parameters all 0: fill them through Params. Errors: an empty list, a
// size that is not positive, mismatched widths, an unknown activation, an
// implementation this CPU lacks, or more than 2^28 parameters.
func NewMLP(layers []Layer, impl Impl) (*MLP, error) {
	if len(layers) == 0 {
		return nil, fmt.Errorf("f32: NewMLP: no layers")
	}
	if !impl.Available() {
		return nil, fmt.Errorf("f32: NewMLP: implementation %v is not available on this CPU or build", impl)
	}
	for i, l := range layers {
		switch {
		case l.In <= 0 || l.Out <= 0:
			return nil, fmt.Errorf("f32: NewMLP: layer %d is %d→%d (sizes must be positive)", i, l.In, l.Out)
		case i > 0 && l.In != layers[i-1].Out:
			return nil, fmt.Errorf("f32: NewMLP: layer %d has In = %d, layer %d has Out = %d", i, l.In, i-1, layers[i-1].Out)
		case l.Act < Identity || l.Act > Softsign:
			return nil, fmt.Errorf("f32: NewMLP: layer %d has activation %v (valid: identity, relu, tanh, softsign)", i, l.Act)
		}
	}
	n := NumParams(layers)
	if n < 0 {
		return nil, fmt.Errorf("f32: NewMLP: more than %d parameters", maxParams)
	}
	net := &MLP{
		impl:   impl.resolve(),
		layers: append([]Layer(nil), layers...),
		offs:   make([]int, len(layers)),
		params: make([]float32, n),
		grads:  make([]float32, n),
		y:      make([][]float32, len(layers)),
		dz:     make([][]float32, len(layers)),
	}
	net.narrow = make([]bool, len(layers))
	off, wt, gwt := 0, 0, 0
	for i, l := range layers {
		net.offs[i] = off
		off += l.In*l.Out + l.Out
		wt = max(wt, l.In*l.Out)
		if l.Out <= narrowOut && l.In >= narrowIn {
			net.narrow[i] = true
			gwt = max(gwt, l.In*l.Out)
		}
	}
	net.wt = make([]float32, wt)
	net.gwt = make([]float32, gwt)
	return net, nil
}

// Impl returns the implementation the MLP computes with (never Auto).
func (n *MLP) Impl() Impl { return n.impl }

// Layers returns a copy of the layer list.
func (n *MLP) Layers() []Layer { return append([]Layer(nil), n.layers...) }

// Params returns the flat parameter vector (the MLP's own; writes change
// the network).
func (n *MLP) Params() []float32 { return n.params }

// Grads returns the flat gradient vector that Backward overwrites.
func (n *MLP) Grads() []float32 { return n.grads }

// w and b return layer i's parameter (or gradient) views in v.
func (n *MLP) w(v []float32, i int) []float32 {
	l := n.layers[i]
	return v[n.offs[i] : n.offs[i]+l.In*l.Out]
}

func (n *MLP) b(v []float32, i int) []float32 {
	l := n.layers[i]
	o := n.offs[i] + l.In*l.Out
	return v[o : o+l.Out]
}

// Forward computes the network's output for the B = len(x)/In rows of x
// and returns it (B×Out of the last layer), owned by the MLP and valid
// until the next Forward. Each layer is one Gemm with the bias and ReLU
// fused (tanh and softsign are applied after it); a narrow layer (Out ≤ 4,
// In ≥ 16) computes yᵀ = Wᵀ·xᵀ instead, with xᵀ and y copied by
// Transpose. It panics unless len(x) is a positive
// multiple of the first layer's In.
//
// Cost: 2·B·Σ In·Out flops; no allocation once a batch this large was
// seen.
func (n *MLP) Forward(x []float32) []float32 {
	in := n.layers[0].In
	if len(x) == 0 || len(x)%in != 0 {
		panic(fmt.Sprintf("f32: MLP.Forward: len(x) = %d is not a positive multiple of the input width %d", len(x), in))
	}
	bsz := len(x) / in
	n.x, n.batch = x, bsz
	for i, l := range n.layers {
		n.y[i] = grow(n.y[i], bsz*l.Out)
		y := n.y[i]
		post := PostNone
		if l.Act == ReLU {
			post = PostReLU
		}
		if n.narrow[i] {
			// yᵀ = Wᵀ·xᵀ + b: A(j, p) = W[p][j], B = xᵀ (In×B), then y = (yᵀ)ᵀ.
			n.xt = grow(n.xt, l.In*bsz)
			n.yt = grow(n.yt, l.Out*bsz)
			n.impl.Transpose(n.xt, bsz, x, l.In, bsz, l.In)
			for j, bj := range n.b(n.params, i) {
				row := n.yt[j*bsz : (j+1)*bsz]
				for r := range row {
					row[r] = bj
				}
			}
			n.impl.Gemm(l.Out, bsz, l.In, n.w(n.params, i), 1, l.Out, n.xt, bsz, n.yt, bsz, InitAcc, nil, post, nil)
			n.impl.Transpose(y, l.Out, n.yt, bsz, l.Out, bsz)
		} else {
			n.impl.Gemm(bsz, l.Out, l.In, x, l.In, 1, n.w(n.params, i), l.Out, y, l.Out, InitBias, n.b(n.params, i), post, nil)
		}
		switch l.Act {
		case Tanh:
			for j, v := range y {
				y[j] = float32(math.Tanh(float64(v)))
			}
		case Softsign:
			for j, v := range y {
				y[j] = v / (1 + float32(math.Abs(float64(v))))
			}
		}
		x = y
	}
	return x
}

// Backward takes dy = dL/dy for the output of the last Forward (B×Out)
// and overwrites Grads with dL/dθ. Per layer, from the top: dW = xᵀ·dz
// (one Gemm over the transposed input; dWᵀ = dzᵀ·x for a narrow layer),
// db = column sums of dz (ColSum) and, below the first layer, dz of the
// layer beneath = (dz·Wᵀ) ⊙ act'(its output), one Gemm with ReLU's or
// tanh's derivative fused (softsign's applied after; Wᵀ is copied into a
// scratch first by Transpose, O(In·Out)). dy is not modified.
//
// Cost: about twice Forward's flops; no allocation after warm-up. It
// panics if there was no Forward or len(dy) does not match it.
func (n *MLP) Backward(dy []float32) { n.backward(dy, false) }

// BackwardInput is Backward that also returns dL/dx (B×In) for the input
// of the last Forward, in a buffer the MLP owns, valid until the next
// backward pass (TD3's policy gradient through a critic's action input).
// Cost: Backward plus one Gemm of the first layer.
func (n *MLP) BackwardInput(dy []float32) []float32 { return n.backward(dy, true) }

func (n *MLP) backward(dy []float32, wantDX bool) []float32 {
	top := len(n.layers) - 1
	bsz := n.batch
	if bsz == 0 || len(dy) != bsz*n.layers[top].Out {
		panic(fmt.Sprintf("f32: MLP.Backward: len(dy) = %d, the last Forward produced %d outputs", len(dy), bsz*n.layers[top].Out))
	}
	// The top layer's dz: dy through its activation.
	dz := dy
	if act := n.layers[top].Act; act != Identity {
		n.dz[top] = grow(n.dz[top], len(dy))
		dz = n.dz[top]
		y := n.y[top][:len(dy)]
		for j, v := range y {
			switch act {
			case ReLU:
				if v > 0 {
					dz[j] = dy[j]
				} else {
					dz[j] = 0
				}
			case Tanh:
				dz[j] = dy[j] * (1 - v*v)
			default: // Softsign
				s := 1 - float32(math.Abs(float64(v)))
				dz[j] = dy[j] * s * s
			}
		}
	}
	for i := top; i >= 0; i-- {
		l := n.layers[i]
		x := n.x
		if i > 0 {
			x = n.y[i-1]
		}
		if n.narrow[i] {
			// dWᵀ = dzᵀ·x (Out×In): A(j, r) = dz[r][j], B = x; then dW.
			gwt := n.gwt[:l.Out*l.In]
			n.impl.Gemm(l.Out, l.In, bsz, dz, 1, l.Out, x, l.In, gwt, l.In, InitZero, nil, PostNone, nil)
			n.impl.Transpose(n.w(n.grads, i), l.Out, gwt, l.In, l.Out, l.In)
		} else {
			// dW = xᵀ·dz: A(r, p) = x[p·In + r].
			n.impl.Gemm(l.In, l.Out, bsz, x, 1, l.In, dz, l.Out, n.w(n.grads, i), l.Out, InitZero, nil, PostNone, nil)
		}
		n.impl.ColSum(n.b(n.grads, i), dz, bsz, l.Out, l.Out)
		if i == 0 && !wantDX {
			return nil
		}
		// dz below = (dz·Wᵀ) ⊙ act'(x); at the first layer dx = dz·Wᵀ.
		w := n.w(n.params, i)
		wt := n.wt[:l.In*l.Out]
		n.impl.Transpose(wt, l.In, w, l.Out, l.In, l.Out)
		if i == 0 {
			n.dx = grow(n.dx, bsz*l.In)
			n.impl.Gemm(bsz, l.In, l.Out, dz, l.Out, 1, wt, l.In, n.dx, l.In, InitZero, nil, PostNone, nil)
			return n.dx
		}
		n.dz[i-1] = grow(n.dz[i-1], bsz*l.In)
		below := n.layers[i-1].Act
		n.impl.Gemm(bsz, l.In, l.Out, dz, l.Out, 1, wt, l.In, n.dz[i-1], l.In, InitZero, nil, below.gradPost(), x)
		dz = n.dz[i-1]
		if below == Softsign {
			softsignGrad(dz, x)
		}
	}
	return nil
}

// softsignGrad multiplies dz by Softsign's derivative (1 − |y|)², y the
// layer's output.
func softsignGrad(dz, y []float32) {
	y = y[:len(dz)]
	for j, v := range y {
		s := 1 - float32(math.Abs(float64(v)))
		dz[j] *= s * s
	}
}

// grow returns s resliced to n, reallocating only if its capacity is short.
func grow(s []float32, n int) []float32 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float32, n)
}
