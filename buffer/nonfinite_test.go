package buffer

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestInsertRefusesNonFinite: a NaN or infinite value in any float column
// is refused whole, naming the column and the item, and nothing is stored
// (a checkpoint could not hold it, and it would poison learning).
func TestInsertRefusesNonFinite(t *testing.T) {
	cfg := Config{Capacity: 64, ObsDim: 3, Action: Continuous, ActionDim: 2, Floats: []FloatColumn{{Name: "mu", Width: 2}}}
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	for name, c := range map[string]struct {
		edit func(*Transitions)
		want string
	}{
		"obs":        {func(t *Transitions) { t.Obs[7] = nan }, "Obs[7] (item 2) is NaN"},
		"next obs":   {func(t *Transitions) { t.NextObs[0] = inf }, "NextObs[0] (item 0) is -Inf"},
		"action":     {func(t *Transitions) { t.ActionVec[9] = nan }, "ActionVec[9] (item 4) is NaN"},
		"reward":     {func(t *Transitions) { t.Reward[4] = inf }, "Reward[4] (item 4) is -Inf"},
		"discount":   {func(t *Transitions) { t.Discount[1] = nan }, "Discount[1] (item 1) is NaN"},
		"float col":  {func(t *Transitions) { t.Floats[0][5] = nan }, "Floats[mu][5] (item 2) is NaN"},
		"last value": {func(t *Transitions) { t.Obs[len(t.Obs)-1] = nan }, "Obs[14] (item 4) is NaN"},
	} {
		b, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tr := makeTransitions(cfg, 5)
		tr.Floats = [][]float32{make([]float32, 10)}
		c.edit(tr)
		err = b.Insert(tr)
		if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want ErrNonFinite mentioning %q", name, err, c.want)
		}
		if b.Size() != 0 {
			t.Errorf("%s: %d items stored from a refused batch", name, b.Size())
		}
	}
}

// TestFirstNonFinite: both kernels (AVX2 where the CPU has it, and the
// portable one) find every NaN and infinity at every position of lengths
// that cover the vector loop and its tail, and pass the largest finite
// values and subnormals.
func TestFirstNonFinite(t *testing.T) {
	defer func(v bool) { useAVX2 = v }(useAVX2)
	kernels := []bool{false}
	if hasAVX2 { // amd64 with AVX2 (as TestScanKernelsAgree, the portable kernel alone elsewhere)
		kernels = append(kernels, true)
	}
	for _, avx := range kernels {
		useAVX2 = avx
		for n := range 42 {
			v := make([]float32, n)
			for i := range v {
				v[i] = []float32{math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 1, -0.5}[i%5]
			}
			if got := firstNonFinite(v); got != -1 {
				t.Fatalf("avx %v, len %d, all finite: %d", avx, n, got)
			}
			for i := range n {
				keep := v[i]
				for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
					v[i] = bad
					if got := firstNonFinite(v); got != i {
						t.Fatalf("avx %v, len %d, %v at %d: got %d", avx, n, bad, i, got)
					}
				}
				v[i] = keep
			}
		}
	}
}
