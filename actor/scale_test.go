package actor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/envs"
)

func TestScaleAction(t *testing.T) {
	// A symmetric box: M·u exactly (TD3's max_action·π(s)), and back.
	sym := envs.Box{Low: []float64{-2, -0.3}, High: []float64{2, 0.3}}
	rng := rand.New(rand.NewPCG(3, 0))
	for range 1000 {
		u := []float64{2*rng.Float64() - 1, 2*rng.Float64() - 1}
		a := make([]float64, 2)
		ScaleAction(sym, a, u)
		if a[0] != 2*u[0] || a[1] != 0.3*u[1] {
			t.Fatalf("symmetric box: %v ↦ %v, want (2·u0, 0.3·u1)", u, a)
		}
		back := make([]float64, 2)
		UnscaleAction(sym, back, a)
		if math.Abs(back[0]-u[0]) > 1e-15 || math.Abs(back[1]-u[1]) > 1e-15 {
			t.Fatalf("symmetric box: Unscale(Scale(%v)) = %v", u, back)
		}
	}
	// An asymmetric box, a batch of three actions in place: −1, 0, 1 go to
	// low, the centre and high; a degenerate dimension stays at its value.
	box := envs.Box{Low: []float64{-1, 0, 4}, High: []float64{3, 10, 4}}
	x := []float64{-1, -1, -1, 0, 0, 0, 1, 1, 1}
	ScaleAction(box, x, x)
	want := []float64{-1, 0, 4, 1, 5, 4, 3, 10, 4}
	for i := range x {
		if x[i] != want[i] {
			t.Fatalf("asymmetric batch: %v, want %v", x, want)
		}
	}
	UnscaleAction(box, x, x)
	for i, w := range []float64{-1, -1, 0, 0, 0, 0, 1, 1, 0} {
		if x[i] != w {
			t.Fatalf("Unscale: %v (the degenerate dimension gives 0)", x)
		}
	}
	// float32, as a learner reads the buffer's ActionVec.
	y := []float32{0.5, -0.5, 0}
	ScaleAction(box, y, y)
	if y[0] != 2 || y[1] != 2.5 || y[2] != 4 {
		t.Fatalf("float32: %v", y)
	}
	UnscaleAction(box, y, y)
	if y[0] != 0.5 || y[1] != -0.5 || y[2] != 0 {
		t.Fatalf("float32 back: %v", y)
	}
	// No clipping.
	z := []float64{2}
	ScaleAction(envs.Box{Low: []float64{-1}, High: []float64{1}}, z, z)
	if z[0] != 2 {
		t.Fatalf("ScaleAction clipped: %v", z)
	}
}

func TestScaleActionPanics(t *testing.T) {
	box := envs.Box{Low: []float64{-1, -1}, High: []float64{1, 1}}
	for name, f := range map[string]func(){
		"unbounded": func() {
			ScaleAction(envs.Box{Low: []float64{-1}, High: []float64{math.Inf(1)}}, []float64{0}, []float64{0})
		},
		"empty box":      func() { ScaleAction(envs.Box{}, []float64{}, []float64{}) },
		"ragged batch":   func() { ScaleAction(box, make([]float64, 3), make([]float64, 3)) },
		"dst too short":  func() { ScaleAction(box, make([]float64, 2), make([]float64, 4)) },
		"unscale ragged": func() { UnscaleAction(box, make([]float32, 1), make([]float32, 1)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestIntoBox(t *testing.T) {
	// Bounds that are not float32 values: the rounded action stays inside.
	lo, hi := 0.1, 0.7
	box := envs.Box{Low: []float64{lo}, High: []float64{hi}}
	for _, v := range []float64{-5, lo, 0.3, hi, 5, math.Nextafter(hi, 0), math.Nextafter(lo, 1)} {
		a, a32 := []float64{v}, []float32{0}
		intoBox(box, a, a32)
		if !(a[0] >= lo && a[0] <= hi) || a[0] != float64(a32[0]) {
			t.Errorf("intoBox(%v) = %v (float32 %v), outside [%v, %v] or not a float32", v, a[0], a32[0], lo, hi)
		}
	}
	a := []float64{math.NaN()}
	if intoBox(box, a, nil); !math.IsNaN(a[0]) {
		t.Errorf("NaN became %v", a[0])
	}
}
