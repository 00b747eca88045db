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
	} {
		got, want := Pow(c[0], c[1]), math.Pow(c[0], c[1])
		if !(got == want || math.IsNaN(got) && math.IsNaN(want)) && math.Abs(got-want) > 1e-15*math.Abs(want) {
			t.Errorf("Pow(%v, %v) = %v, math.Pow %v", c[0], c[1], got, want)
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
