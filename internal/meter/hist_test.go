package meter

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistBuckets(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	vals := []int64{0, 1, 63, 64, 127, 128, 129, 255, 256, 1000, 1 << 20, 1<<40 + 12345, 1<<62 + 1, 1<<63 - 1}
	for range 10000 {
		vals = append(vals, rng.Int64N(1<<uint(rng.IntN(62)+1)))
	}
	for _, v := range vals {
		i := histIndex(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d out of range", v, i)
		}
		up := histUpper(i)
		lo := int64(0)
		if i > 0 {
			lo = histUpper(i-1) + 1
		}
		if v < lo || v > up {
			t.Fatalf("value %d in bucket %d = [%d, %d]", v, i, lo, up)
		}
		if float64(up-lo) > float64(v)/histSub+1 {
			t.Fatalf("bucket %d = [%d, %d] wider than 1/%d of %d", i, lo, up, histSub, v)
		}
	}
}

func TestHistQuantiles(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 {
		t.Fatal("empty Histogram quantile != 0")
	}
	rng := rand.New(rand.NewPCG(2, 2))
	var xs []int64
	for range 100000 {
		v := rng.Int64N(1e6) + 1000
		xs = append(xs, v)
		h.Record(time.Duration(v))
	}
	slices.Sort(xs)
	for _, q := range []float64{0.5, 0.99, 0.999, 1} {
		exact := xs[int(q*float64(len(xs))+0.5)-1]
		got := int64(h.Quantile(q))
		if got < exact || float64(got-exact) > float64(exact)/histSub+1 {
			t.Errorf("q=%v: %d, exact %d", q, got, exact)
		}
	}
	if int64(h.Quantile(1)) != xs[len(xs)-1] || h.max != xs[len(xs)-1] {
		t.Errorf("max %d, quantile(1) %d, want %d", h.max, h.Quantile(1), xs[len(xs)-1])
	}
	h.Record(-5)
	if h.counts[0] != 1 {
		t.Error("negative duration not counted as 0")
	}
}
