package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
)

// DenseParams returns the number of parameters of a Dense layer from in to
// out units: in·out weights and out biases.
func DenseParams(in, out int) int { return in*out + out }

// Dense is a fully connected layer y = f(x·W + b) over a batch of B rows:
// x is B×In, W is In×Out, b has Out entries and y is B×Out, all row-major.
// Its parameters are a view into a caller's flat vector (W row-major, then
// b) and so are its gradients; a Net lays out all its layers that way, and
// an embedder building another architecture (two streams, a shared trunk,
// a permutation-equivariant scorer) can slice one flat vector for several
// layers the same way, so optimizers and snapshots see one []float64.
//
// Forward keeps a reference to its input and its own output buffer;
// Backward uses both and the current W, so neither x nor the parameters
// may change between the two calls. Buffers
// grow to the largest batch seen and are then reused: after warm-up
// neither call allocates. Matrix products go through gonum's blas64 (pure
// Go, SSE2 kernels; OpenBLAS under the openblas build tag), tiled so that
// gonum never starts its parallel workers: the layer runs entirely on the
// caller's goroutine.
//
// A Dense is not safe for concurrent use.
type Dense struct {
	in, out int
	act     Activation
	name    string // for Where: "layer 0", "value 1", ...
	off     int    // offset of w in the owner's flat vector

	w, b   []float64 // parameters (views)
	gw, gb []float64 // gradients (views)

	x  []float64 // last input (the caller's)
	y  []float64 // last output, B×out
	dz []float64 // pre-activation gradient scratch, B×out
	dx []float64 // input gradient, B×in

	// A narrow layer (Out ≤ In/4, a Q head) multiplies through Wᵀ so that
	// every BLAS call runs along In instead of along the few outputs
	// (gonum's kernels cost a call per row of length Out otherwise).
	narrow bool
	wt     []float64 // Wᵀ (Out×In) as of the last Forward; narrow only
	gwt    []float64 // dL/dWᵀ scratch (Out×In); narrow only
}

// NewDense returns a layer from in to out units with activation act whose
// parameters live in params[:DenseParams(in, out)] and whose gradients go
// to grads[:DenseParams(in, out)]. It does not initialize the parameters
// (see InitGlorot). Errors: a size that is not positive or a layer of more
// than 2^28 parameters (ErrConfig), an invalid act (ErrConfig), or a slice
// too short (ErrShape).
func NewDense(in, out int, act Activation, params, grads []float64) (*Dense, error) {
	d := new(Dense)
	if err := d.init(in, out, act, params, grads); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Dense) init(in, out int, act Activation, params, grads []float64) error {
	switch {
	case in <= 0 || out <= 0:
		return errorf(ErrConfig, "NewDense(%d, %d): sizes must be positive", in, out)
	case in > maxParams || out > maxParams || in*out > maxParams:
		return errorf(ErrConfig, "NewDense(%d, %d): more than %d parameters", in, out, maxParams)
	case !act.valid():
		return errorf(ErrConfig, "NewDense: invalid activation %v", act)
	}
	n := DenseParams(in, out)
	if len(params) < n || len(grads) < n {
		return errorf(ErrShape, "NewDense(%d, %d): needs %d parameters and gradients, got %d and %d", in, out, n, len(params), len(grads))
	}
	*d = Dense{
		in: in, out: out, act: act,
		w: params[: in*out : in*out], b: params[in*out : n : n],
		gw: grads[: in*out : in*out], gb: grads[in*out : n : n],
		narrow: 4*out <= in,
	}
	if d.narrow {
		d.wt = make([]float64, in*out)
		d.gwt = make([]float64, in*out)
	}
	return nil
}

// transpose writes the r×c row-major matrix src into dst as c×r.
func transpose(dst, src []float64, r, c int) {
	for i := range r {
		row := src[i*c : (i+1)*c]
		for j, v := range row {
			dst[j*r+i] = v
		}
	}
}

// In returns the number of inputs.
func (d *Dense) In() int { return d.in }

// Out returns the number of outputs.
func (d *Dense) Out() int { return d.out }

// Activation returns the layer's activation.
func (d *Dense) Activation() Activation { return d.act }

// InitGlorot draws W from Glorot (Xavier) uniform, U(-l, l) with
// l = sqrt(6/(In+Out)) (Glorot & Bengio 2010, eq. 16), row by row from rng,
// and sets b to 0. Cost: O(In·Out) draws.
func (d *Dense) InitGlorot(rng *rand.Rand) {
	l := math.Sqrt(6 / float64(d.in+d.out))
	for i := range d.w {
		d.w[i] = (2*rng.Float64() - 1) * l
	}
	clear(d.b)
}

// Forward computes y = f(x·W + b) for the B = len(x)/In rows of x and
// returns y (B×Out), which the layer owns: it is valid until the next
// Forward. It panics if len(x) is not a positive multiple of In.
//
// Cost: B=1 is one matrix-vector product (2·In·Out flops, gemv); B>1 one
// GEMM (2·B·In·Out flops). No allocation once the layer has seen a batch
// this large.
func (d *Dense) Forward(x []float64) []float64 {
	bsz := batchOf(len(x), d.in)
	d.x = x
	d.y = grow(d.y, bsz*d.out)
	y := d.y
	for r := 0; r < bsz; r++ {
		copy(y[r*d.out:(r+1)*d.out], d.b)
	}
	switch {
	case bsz == 1: // y = Wᵀx + y
		blas64.Implementation().Dgemv(blas.Trans, d.in, d.out, 1, d.w, d.out, x, 1, 1, y, 1)
	case d.narrow: // y = x·(Wᵀ)ᵀ + y
		transpose(d.wt, d.w, d.in, d.out)
		gemm(blas.NoTrans, blas.Trans, bsz, d.out, d.in, x, d.in, d.wt, d.in, 1, y, d.out)
	default: // y = x·W + y
		gemm(blas.NoTrans, blas.NoTrans, bsz, d.out, d.in, x, d.in, d.w, d.out, 1, y, d.out)
	}
	d.act.apply(y)
	return y
}

// Backward takes dy = dL/dy for the batch of the last Forward (B×Out),
// sets the layer's gradients to dL/dW = xᵀ·dz and dL/db = Σ_rows dz, where
// dz = dy ⊙ f'(·), and, when wantDX, returns dL/dx = dz·Wᵀ (B×In, owned by
// the layer, valid until the next Backward); otherwise it returns nil.
// Gradients are overwritten, not accumulated. dy is not modified.
//
// Cost: two GEMMs (one without wantDX), 2·B·In·Out flops each, plus
// O(B·Out). No allocation after warm-up. It panics if len(dy) does not
// match the last Forward.
func (d *Dense) Backward(dy []float64, wantDX bool) []float64 {
	n := len(d.y)
	if n == 0 || len(dy) != n {
		panic(fmt.Sprintf("model: Dense.Backward: len(dy) = %d, the last Forward produced %d outputs", len(dy), n))
	}
	bsz := n / d.out
	dz := dy
	if d.act != Identity {
		d.dz = grow(d.dz, n)
		dz = d.dz
		d.act.backprop(dz, dy, d.y)
	}
	if d.narrow {
		transpose(d.wt, d.w, d.in, d.out) // for dx below; O(In·Out), small
		// dWᵀ = dzᵀ·x (Out×In), then transposed into dW.
		gemm(blas.Trans, blas.NoTrans, d.out, d.in, bsz, dz, d.out, d.x, d.in, 0, d.gwt, d.in)
		transpose(d.gw, d.gwt, d.out, d.in)
	} else {
		// dW = xᵀ·dz (In×Out).
		gemm(blas.Trans, blas.NoTrans, d.in, d.out, bsz, d.x, d.in, dz, d.out, 0, d.gw, d.out)
	}
	// db = Σ_rows dz.
	copy(d.gb, dz[:d.out])
	for r := 1; r < bsz; r++ {
		floats.Add(d.gb, dz[r*d.out:(r+1)*d.out])
	}
	if !wantDX {
		return nil
	}
	// dx = dz·Wᵀ (B×In).
	d.dx = grow(d.dx, bsz*d.in)
	if d.narrow {
		gemm(blas.NoTrans, blas.NoTrans, bsz, d.in, d.out, dz, d.out, d.wt, d.in, 0, d.dx, d.in)
	} else {
		gemm(blas.NoTrans, blas.Trans, bsz, d.in, d.out, dz, d.out, d.w, d.out, 0, d.dx, d.in)
	}
	return d.dx
}

// batchOf returns n/width, panicking unless n is a positive multiple of
// width.
func batchOf(n, width int) int {
	if n <= 0 || n%width != 0 {
		panic(fmt.Sprintf("model: input of length %d is not a positive multiple of the input width %d", n, width))
	}
	return n / width
}

// grow returns s resliced to n, reallocating only if its capacity is short.
func grow(s []float64, n int) []float64 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float64, n)
}

// Tiling of matrix products. gonum's Dgemm computes C in 64×64 blocks and
// starts GOMAXPROCS worker goroutines (about 200 allocations at B=256) as
// soon as C has 4 blocks or more. The model is a pure, single-goroutine
// component, so gemm splits C into pieces of fewer than 4 blocks, which
// gonum computes serially with the same kernels. With OpenBLAS (the openblas
// build tag) one call is cheaper: serialTiles is then false.
const (
	gemmBlock    = 64 // gonum's blockSize
	gemmMaxBlock = 3  // gonum parallelizes from minParBlock = 4 blocks
)

var serialTiles = true

// gemm computes C = A·B + beta·C (with A and B optionally transposed) for C
// m×n, in tiles that gonum computes on the calling goroutine.
func gemm(tA, tB blas.Transpose, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	impl := blas64.Implementation()
	blocks := func(x int) int { return (x + gemmBlock - 1) / gemmBlock }
	if !serialTiles || blocks(m)*blocks(n) <= gemmMaxBlock {
		impl.Dgemm(tA, tB, m, n, k, 1, a, lda, b, ldb, beta, c, ldc)
		return
	}
	colStep := n
	if blocks(n) > gemmMaxBlock {
		colStep = gemmBlock
	}
	rowStep := gemmBlock * (gemmMaxBlock / blocks(colStep))
	for i0 := 0; i0 < m; i0 += rowStep {
		mi := min(rowStep, m-i0)
		offA := i0 * lda // A is m×k: rows i0…
		if tA != blas.NoTrans {
			offA = i0 // A is k×m: columns i0…
		}
		for j0 := 0; j0 < n; j0 += colStep {
			nj := min(colStep, n-j0)
			offB := j0 // B is k×n: columns j0…
			if tB != blas.NoTrans {
				offB = j0 * ldb // B is n×k: rows j0…
			}
			impl.Dgemm(tA, tB, mi, nj, k, 1, a[offA:], lda, b[offB:], ldb, beta, c[i0*ldc+j0:], ldc)
		}
	}
}
