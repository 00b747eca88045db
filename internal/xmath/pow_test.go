package xmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPowMatchesMathPow compares Pow with math.Pow on the replay path's
// ranges (priorities |δ|+ε over 30 decades with α in (0, 1]; weights N·P
// in (0, 2^32] with -β in [-1, 0)) within the documented error, and on
// the special cases exactly.
func TestPowMatchesMathPow(t *testing.T) {
	for _, vec := range []bool{true, false} {
		if vec && !useAVX2 {
			continue
		}
		old := useAVX2
		useAVX2 = vec
		testPowMatchesMathPow(t)
		useAVX2 = old
	}
}

func testPowMatchesMathPow(t *testing.T) {
	const seed = 17
	rng := rand.New(rand.NewPCG(seed, 0))
	for i := range 200000 {
		x := math.Pow(10, -15+30*rng.Float64())
		y := rng.Float64()
		if i%2 == 1 {
			x, y = math.Ldexp(rng.Float64(), rng.IntN(33)), -rng.Float64()
		}
		got, want := Pow(x, y), math.Pow(x, y)
		bound := (2*math.Abs(y*math.Log(x))+4)*0x1p-52 + 1e-300
		if math.Abs(got-want) > bound*want {
			t.Fatalf("seed %d: Pow(%v, %v) = %v, math.Pow %v: relative error %.3g above %.3g", seed, x, y, got, want, math.Abs(got-want)/want, bound)
		}
	}
	for _, c := range [][2]float64{
		{0, 0.6}, {0, -0.4}, {math.Inf(1), 0.6}, {math.Inf(1), -0.4}, {math.NaN(), 0.6},
		{3, 0}, {0, 0}, {math.Inf(1), 0}, {-2, 0.5}, {-8, 1.0 / 3}, {1, math.NaN()}, {5e-324, 0.6},
		{1e-300, 0.9999}, {1e-300, -1}, {math.MaxFloat64, -1}, {math.MaxFloat64, 0.5}, {0x1p-1022, 1}, {2, 1023}, {2, -1074},
	} {
		got, want := Pow(c[0], c[1]), math.Pow(c[0], c[1])
		bound := 1e-15 // special cases: math.Pow's own
		if c[0] > 0 && !math.IsInf(c[0], 1) && c[1] == c[1] {
			bound = (2*math.Abs(c[1]*math.Log(c[0])) + 4) * 0x1p-52
		}
		if !(got == want || math.IsNaN(got) && math.IsNaN(want)) && math.Abs(got-want) > bound*math.Abs(want) {
			t.Errorf("Pow(%v, %v) = %v, math.Pow %v", c[0], c[1], got, want)
		}
	}
}

// TestPowAffineMatchesPow checks that PowAffine gives Pow's bits for every
// element, over lengths with and without a tail, with elements outside the
// vector kernel's range mixed in, on the vector and the portable path.
func TestPowAffineMatchesPow(t *testing.T) {
	const seed = 23
	rng := rand.New(rand.NewPCG(seed, 0))
	odd := []float64{0, -1, math.Inf(1), math.NaN(), 5e-324, math.MaxFloat64, 1e-310, 1e308, 1e300}
	for _, vec := range []bool{true, false} {
		if vec && !useAVX2 {
			continue
		}
		old := useAVX2
		useAVX2 = vec
		for _, n := range []int{0, 1, 3, 4, 7, 64, 513} {
			x := make([]float64, n)
			for i := range x {
				x[i] = rng.ExpFloat64()
				if rng.IntN(8) == 0 {
					x[i] = odd[rng.IntN(len(odd))]
				}
			}
			for _, c := range [][3]float64{{1, 1e-6, 0.6}, {4096, 0, -0.4}, {1, 0, -1}, {2, 0.5, 0}, {1, 0, 1}, {1, 0, 2}} {
				for _, alias := range []bool{false, true} {
					dst := make([]float64, n)
					if alias { // dst is x: elements outside the kernel's range must still come out right
						copy(dst, x)
						PowAffine(dst, dst, c[0], c[1], c[2])
					} else {
						PowAffine(dst, x, c[0], c[1], c[2])
					}
					for i, got := range dst {
						want := Pow(math.FMA(c[0], x[i], c[1]), c[2])
						if math.Float64bits(got) != math.Float64bits(want) && !(got != got && want != want) {
							t.Fatalf("seed %d, vector %v, n %d, (a, b, y) = %v, aliased %v: PowAffine[%d] = %v, Pow %v (x = %v)", seed, vec, n, c, alias, i, got, want, x[i])
						}
					}
				}
			}
		}
		useAVX2 = old
	}
	defer func() {
		if recover() == nil {
			t.Error("PowAffine with mismatched lengths did not panic")
		}
	}()
	PowAffine(make([]float64, 3), make([]float64, 4), 1, 0, 1)
}

// TestPowExactExponents checks that y = 1 and y = -1 give x and 1/x
// exactly (α = 1 priorities and β = 1 weights), through Pow and PowAffine.
func TestPowExactExponents(t *testing.T) {
	xs := []float64{3, 0.1, 1e-7, 12345.678, 1e300}
	dst := make([]float64, len(xs))
	for _, y := range []float64{1, -1} {
		PowAffine(dst, xs, 1, 0, y)
		for i, x := range xs {
			want := x
			if y == -1 {
				want = 1 / x
			}
			if got := Pow(x, y); got != want {
				t.Errorf("Pow(%v, %v) = %v, want %v", x, y, got, want)
			}
			if dst[i] != want {
				t.Errorf("PowAffine(%v, y=%v) = %v, want %v", x, y, dst[i], want)
			}
		}
	}
}

var sink float64

// BenchmarkPow compares Pow with math.Pow on 512 priorities.
func BenchmarkPow(b *testing.B) {
	xs := make([]float64, 512)
	for i := range xs {
		xs[i] = 1e-6 + float64(i)*0.37
	}
	for _, c := range []struct {
		name string
		f    func(x, y float64) float64
	}{{"xmath", Pow}, {"math", math.Pow}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				for _, x := range xs {
					sink += c.f(x, 0.6)
				}
			}
		})
	}
}

// BenchmarkPowAffine is 512 priorities (|δ|+ε)^α at once, against a loop
// of math.Pow.
func BenchmarkPowAffine(b *testing.B) {
	xs := make([]float64, 512)
	for i := range xs {
		xs[i] = float64(i) * 0.37
	}
	dst := make([]float64, 512)
	b.Run("xmath", func(b *testing.B) {
		for b.Loop() {
			PowAffine(dst, xs, 1, 1e-6, 0.6)
		}
	})
	b.Run("math", func(b *testing.B) {
		for b.Loop() {
			for i, x := range xs {
				dst[i] = math.Pow(x+1e-6, 0.6)
			}
		}
	})
}
