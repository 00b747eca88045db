package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"
)

// naiveGemm is C = op(A)·op(B) + beta·C by definition.
func naiveGemm(tA, tB blas.Transpose, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	for i := range m {
		for j := range n {
			var s float64
			for l := range k {
				ia, ib := i*lda+l, l*ldb+j
				if tA != blas.NoTrans {
					ia = l*lda + i
				}
				if tB != blas.NoTrans {
					ib = j*ldb + l
				}
				av, bv := a[ia], b[ib]
				s += av * bv
			}
			c[i*ldc+j] = s + beta*c[i*ldc+j]
		}
	}
}

// TestGemmTiles checks the tiled products against the definition across
// tile boundaries, for every transpose combination, and that they start no
// goroutine (gonum would for 4 or more 64×64 blocks).
func TestGemmTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	sizes := [][3]int{{1, 1, 1}, {64, 64, 64}, {192, 64, 9}, {193, 64, 5}, {300, 250, 70}, {70, 400, 3}, {256, 256, 1}}
	for _, sz := range sizes {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				lda, ldb := k, n
				if tA != blas.NoTrans {
					lda = m
				}
				if tB != blas.NoTrans {
					ldb = k
				}
				a, b := randVec(rng, m*k, 1), randVec(rng, k*n, 1)
				c0 := randVec(rng, m*n, 1)
				for _, beta := range []float64{0, 1} {
					got, want := append([]float64(nil), c0...), append([]float64(nil), c0...)
					g0 := runtime.NumGoroutine()
					gemm(tA, tB, m, n, k, a, lda, b, ldb, beta, got, n)
					if g := runtime.NumGoroutine(); g != g0 {
						t.Errorf("gemm started goroutines: %d → %d", g0, g)
					}
					naiveGemm(tA, tB, m, n, k, a, lda, b, ldb, beta, want, n)
					for i := range got {
						if math.Abs(got[i]-want[i]) > 1e-12*float64(k+1) {
							t.Fatalf("%dx%dx%d tA=%c tB=%c beta=%g: C[%d] = %g, want %g", m, n, k, tA, tB, beta, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestZeroAllocs checks the hot paths allocate nothing after warm-up, for
// batches and widths that need tiling too.
func TestZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation may allocate")
	}
	for _, cfg := range []Config{
		{In: 4, Hidden: []int{64, 64}, Out: 2},
		{In: 8, Hidden: []int{256, 256}, Out: 6, Act: Tanh, Dueling: true, StreamHidden: []int{32}},
	} {
		for _, b := range []int{1, 64, 256} {
			t.Run(fmt.Sprintf("hidden=%v/B=%d", cfg.Hidden, b), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(1, 2))
				net, err := NewNet(cfg, rng)
				if err != nil {
					t.Fatal(err)
				}
				adam, err := NewAdam(net.NumParams(), AdamConfig{ClipNorm: 10})
				if err != nil {
					t.Fatal(err)
				}
				x := randVec(rng, b*cfg.In, 1)
				x32 := make([]float32, len(x))
				actions := make([]int32, b)
				target, weight, qa := randVec(rng, b, 1), randVec(rng, b, 1), make([]float64, b)
				dq := make([]float64, b*cfg.Out)
				target2 := net.Clone()
				store := new(Store)
				step := func() {
					net.Forward32(x32)
					q := net.Forward(x)
					Gather(qa, q, actions)
					Loss{}.Selected(dq, q, actions, target, weight)
					net.Backward(dq)
					if _, err := adam.Step(net.Params(), net.Grads()); err != nil {
						t.Fatal(err)
					}
					target2.SoftUpdate(net, 0.01)
					if p := store.Load(); p != nil {
						_ = target2.SetParams(p)
					}
				}
				store.Publish(net.Snapshot(1))
				step()
				if a := testing.AllocsPerRun(20, step); a != 0 {
					t.Errorf("train step: %v allocations, want 0", a)
				}
				if a := testing.AllocsPerRun(20, func() { net.Forward(x[:cfg.In]) }); a != 0 {
					t.Errorf("single forward: %v allocations, want 0", a)
				}
			})
		}
	}
}

// mustDense returns NewDense(...) and fails the test on error.
func mustDense(t testing.TB, in, out int, act Activation, params, grads []float64) *Dense {
	t.Helper()
	d, err := NewDense(in, out, act, params, grads)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestNewDenseErrors: the constructor refuses bad sizes, activations and
// short slices with an error, never a panic.
func TestNewDenseErrors(t *testing.T) {
	p := make([]float64, DenseParams(2, 3))
	for _, c := range []struct {
		name    string
		in, out int
		act     Activation
		params  []float64
		is      error
		text    string
	}{
		{"zero in", 0, 3, ReLU, p, ErrConfig, "sizes must be positive"},
		{"negative out", 2, -3, ReLU, p, ErrConfig, "sizes must be positive"},
		{"overflowing", 1 << 40, 1 << 40, ReLU, p, ErrConfig, "more than"},
		{"unset act", 2, 3, 0, p, ErrConfig, "invalid activation"},
		{"short params", 2, 3, ReLU, p[:5], ErrShape, "needs 9 parameters"},
	} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s: panicked: %v", c.name, r)
				}
			}()
			_, err = NewDense(c.in, c.out, c.act, c.params, p)
		}()
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v, want %v saying %q", c.name, err, c.is, c.text)
		}
	}
}

// TestDensePanics: Forward and Backward keep their documented panics for
// shapes the caller owns (the hot path has no error result).
func TestDensePanics(t *testing.T) {
	p := make([]float64, DenseParams(2, 3))
	for name, f := range map[string]func(){
		"ragged input":   func() { mustDense(t, 2, 3, ReLU, p, p).Forward(make([]float64, 3)) },
		"empty input":    func() { mustDense(t, 2, 3, ReLU, p, p).Forward(nil) },
		"backward first": func() { mustDense(t, 2, 3, ReLU, p, p).Backward(make([]float64, 3), false) },
		"backward shape": func() {
			d := mustDense(t, 2, 3, ReLU, p, p)
			d.Forward(make([]float64, 4))
			d.Backward(make([]float64, 3), false)
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			f()
		})
	}
}

func TestGlorot(t *testing.T) {
	const in, out = 200, 300
	p := make([]float64, DenseParams(in, out))
	for i := range p {
		p[i] = 7
	}
	d := mustDense(t, in, out, Tanh, p, make([]float64, len(p)))
	d.InitGlorot(rand.New(rand.NewPCG(1, 1)))
	l := math.Sqrt(6.0 / (in + out))
	var sum, sq, maxAbs float64
	for _, w := range d.w {
		sum += w
		sq += w * w
		maxAbs = math.Max(maxAbs, math.Abs(w))
	}
	n := float64(len(d.w))
	if maxAbs > l {
		t.Errorf("max |w| = %g > limit %g", maxAbs, l)
	}
	// U(-l, l): mean 0, variance l²/3 = 2/(in+out).
	if mean := sum / n; math.Abs(mean) > 0.01*l {
		t.Errorf("mean %g", mean)
	}
	if v, want := sq/n, 2.0/(in+out); math.Abs(v-want) > 0.02*want {
		t.Errorf("variance %g, want %g", v, want)
	}
	for _, b := range d.b {
		if b != 0 {
			t.Fatalf("bias %g, want 0", b)
		}
	}
}

func TestActivationValues(t *testing.T) {
	x := []float64{-2, -0.5, 0, 0.5, 2, math.NaN()}
	want := map[Activation][]float64{
		Identity: {-2, -0.5, 0, 0.5, 2},
		ReLU:     {0, 0, 0, 0.5, 2},
		Tanh:     {math.Tanh(-2), math.Tanh(-0.5), 0, math.Tanh(0.5), math.Tanh(2)},
		Softsign: {-2.0 / 3, -0.5 / 1.5, 0, 0.5 / 1.5, 2.0 / 3},
	}
	for a, w := range want {
		y := append([]float64(nil), x...)
		a.apply(y)
		for i := range w {
			if y[i] != w[i] {
				t.Errorf("%v(%g) = %g, want %g", a, x[i], y[i], w[i])
			}
		}
		if !math.IsNaN(y[len(y)-1]) {
			t.Errorf("%v(NaN) = %g: NaN must propagate", a, y[len(y)-1])
		}
		s, _ := a.MarshalText()
		var back Activation
		if err := back.UnmarshalText(s); err != nil || back != a {
			t.Errorf("text round trip of %v: %v, %v", a, back, err)
		}
	}
	if _, err := ParseActivation("gelu"); err == nil {
		t.Error("ParseActivation(gelu) succeeded")
	}
}
