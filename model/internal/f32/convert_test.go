package f32

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestConvertMatchesGo: ToFloat32 and ToFloat64 agree bit for bit with
// Go's conversions in every implementation, for every length up to 41
// (the 8-wide body and each tail) and for the special values: ±0, ±Inf,
// NaN, values beyond float32's range, float32 subnormals and halfway
// cases that round to even.
func TestConvertMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	special := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1e39, -1e300,
		1e-40, -3e-45, 1e-50, 1 + 1.0/(1<<24), 1 + 3.0/(1<<24), math.MaxFloat32, math.SmallestNonzeroFloat64}
	for _, impl := range []Impl{Portable, AVX2, AVX512} {
		if !impl.Available() {
			continue
		}
		for n := 0; n <= 41; n++ {
			src := make([]float64, n)
			for i := range src {
				if rng.IntN(3) == 0 {
					src[i] = special[rng.IntN(len(special))]
				} else {
					src[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10))
				}
			}
			dst := make([]float32, n+1)
			dst[n] = 42 // a guard past the end
			impl.ToFloat32(dst[:n], src)
			back := make([]float64, n+1)
			back[n] = 42
			impl.ToFloat64(back[:n], dst[:n])
			for i, v := range src {
				want := float32(v)
				if math.Float32bits(dst[i]) != math.Float32bits(want) && !(want != want && dst[i] != dst[i]) {
					t.Fatalf("%v n=%d: ToFloat32(%g)[%d] = %g, Go %g", impl, n, v, i, dst[i], want)
				}
				if w := float64(dst[i]); math.Float64bits(back[i]) != math.Float64bits(w) && !(w != w && back[i] != back[i]) {
					t.Fatalf("%v n=%d: ToFloat64(%g)[%d] = %g, Go %g", impl, n, dst[i], i, back[i], w)
				}
			}
			if dst[n] != 42 || back[n] != 42 {
				t.Fatalf("%v n=%d: wrote past the end", impl, n)
			}
		}
	}
}

func TestConvertPanicsOnLengths(t *testing.T) {
	for _, f := range []func(){
		func() { Auto.ToFloat32(make([]float32, 3), make([]float64, 4)) },
		func() { Auto.ToFloat64(make([]float64, 9), make([]float32, 8)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic on mismatched lengths")
				}
			}()
			f()
		}()
	}
}
