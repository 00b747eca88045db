package sampler_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

func newPER(t testing.TB, buf *buffer.Buffer, cfg sampler.PERConfig) *sampler.PER {
	t.Helper()
	p, err := sampler.NewPER(buf, cfg)
	if err != nil {
		t.Fatalf("NewPER: %v", err)
	}
	return p
}

func TestPERConformance(t *testing.T) {
	samplertest.Run(t, func(t *testing.T, buf *buffer.Buffer) sampler.Selector {
		return newPER(t, buf, sampler.DefaultPERConfig(100))
	}, samplertest.Options{PriorityBased: true})
}

func TestPERConformanceBatchNormalized(t *testing.T) {
	cfg := sampler.DefaultPERConfig(0)
	cfg.Alpha, cfg.Normalize = 1, buffer.NormalizeBatch
	samplertest.Run(t, func(t *testing.T, buf *buffer.Buffer) sampler.Selector {
		return newPER(t, buf, cfg)
	}, samplertest.Options{PriorityBased: true, Seed: 77})
}

func TestLinear(t *testing.T) {
	l := sampler.Linear{Start: 0.4, End: 1, Steps: 1000}
	for _, c := range []struct {
		step int64
		want float64
	}{{-5, 0.4}, {0, 0.4}, {250, 0.55}, {500, 0.7}, {1000, 1}, {5000, 1}} {
		if got := l.At(c.step); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("At(%d) = %v, want %v", c.step, got, c.want)
		}
	}
	for _, steps := range []int64{0, -1} {
		if got := (sampler.Linear{Start: 0.4, End: 1, Steps: steps}).At(0); got != 1 {
			t.Errorf("Steps=%d: At(0) = %v, want End", steps, got)
		}
	}
	d := sampler.DefaultPERConfig(200).Beta
	if d.At(0) != sampler.DefaultPERBeta0 || d.At(200) != 1 {
		t.Errorf("default PER beta: b(0) = %v, b(T) = %v; want 0.4, 1", d.At(0), d.At(200))
	}
}

func TestPERConfigValidation(t *testing.T) {
	buf := samplertest.NewBuffer(t, 8)
	ok := sampler.DefaultPERConfig(10)
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	if ok.Alpha != 0.6 || ok.Eps != 1e-6 || ok.Beta != (sampler.Linear{Start: 0.4, End: 1, Steps: 10}) || ok.Normalize != buffer.NormalizeBuffer {
		t.Fatalf("DefaultPERConfig = %+v", ok)
	}
	if err := (sampler.PERConfig{}).Validate(); err != nil {
		t.Errorf("zero config (alpha 0, eps 0, beta 0) should be valid: %v", err)
	}
	nan, inf := math.NaN(), math.Inf(1)
	for name, mod := range map[string]func(*sampler.PERConfig){
		"alpha<0":   func(c *sampler.PERConfig) { c.Alpha = -0.1 },
		"alpha NaN": func(c *sampler.PERConfig) { c.Alpha = nan },
		"alpha Inf": func(c *sampler.PERConfig) { c.Alpha = inf },
		"eps<0":     func(c *sampler.PERConfig) { c.Eps = -1e-9 },
		"eps NaN":   func(c *sampler.PERConfig) { c.Eps = nan },
		"eps Inf":   func(c *sampler.PERConfig) { c.Eps = inf },
		"beta0>1":   func(c *sampler.PERConfig) { c.Beta.Start = 1.5 },
		"beta1<0":   func(c *sampler.PERConfig) { c.Beta.End = -0.1 },
		"beta NaN":  func(c *sampler.PERConfig) { c.Beta.Start = nan },
		"norm":      func(c *sampler.PERConfig) { c.Normalize = 9 },
	} {
		c := ok
		mod(&c)
		if _, err := sampler.NewPER(buf, c); !errors.Is(err, buffer.ErrConfig) {
			t.Errorf("%s: NewPER: %v, want ErrConfig", name, err)
		}
	}
	if _, err := sampler.NewPER(nil, ok); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("nil buffer: %v, want ErrConfig", err)
	}
	noMin := samplertest.Config(8)
	noMin.NoMinTree = true
	nb, err := buffer.New(noMin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sampler.NewPER(nb, ok); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("NormalizeBuffer without a min tree: %v, want ErrConfig", err)
	}
	ok.Normalize = buffer.NormalizeBatch
	if _, err := sampler.NewPER(nb, ok); err != nil {
		t.Errorf("NormalizeBatch without a min tree: %v", err)
	}
}

func TestPERPriority(t *testing.T) {
	buf := samplertest.NewBuffer(t, 8)
	p := newPER(t, buf, sampler.DefaultPERConfig(10))
	for _, d := range []float64{0, 1e-3, 0.5, 1, 7} {
		// (|δ|+ε)^α to xmath.Pow's documented precision (about 1e-14 here).
		if got, want := p.Priority(d), math.Pow(d+1e-6, 0.6); math.Abs(got-want) > 1e-14*want {
			t.Errorf("Priority(%v) = %v, want %v (relative 1e-14)", d, got, want)
		}
	}
	if got := p.Priority(-1); got != buf.MaxPriority() {
		t.Errorf("Priority(-1) = %v, want MaxPriority %v", got, buf.MaxPriority())
	}
	if got := p.Priority(math.NaN()); !math.IsNaN(got) {
		t.Errorf("Priority(NaN) = %v, want NaN (Insert rejects it)", got)
	}
}

// fillPER inserts n items and sets item i's |delta| to td[i] through PER's
// Update, returning the slot of each item id.
func fillPER(t *testing.T, buf *buffer.Buffer, s sampler.Selector, td []float64) (slotOf []int) {
	t.Helper()
	n := len(td)
	samplertest.Insert(t, buf, 0, n, nil)
	refs := make([]buffer.Ref, n)
	slotOf = make([]int, n)
	b := samplertest.NewBatch(t, buf, 1)
	for slot := range buf.Capacity() {
		ref, _, ok := buf.SlotPriority(slot)
		if !ok || !buf.GatherRef(b, 0, ref) {
			t.Fatalf("slot %d is not readable", slot)
		}
		id := samplertest.ID(b, 0)
		refs[id], slotOf[id] = ref, slot
	}
	if res, err := s.Update(refs, td); err != nil || res.Applied != n {
		t.Fatalf("Update: %+v, %v", res, err)
	}
	return slotOf
}

// drawCounts samples rounds batches of k rows and counts the draws of each
// item id.
func drawCounts(t *testing.T, s sampler.Selector, buf *buffer.Buffer, seed uint64, n, k, rounds int) []int {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	b := samplertest.NewBatch(t, buf, k)
	counts := make([]int, n)
	for range rounds {
		if err := s.Sample(rng, b); err != nil {
			t.Fatalf("seed %#x: Sample: %v", seed, err)
		}
		for j := range k {
			counts[samplertest.ID(b, j)]++
		}
	}
	return counts
}

func TestPERChiSquare(t *testing.T) {
	const n, k, rounds, seed = 50, 10, 10_000, 0xc41
	buf := samplertest.NewBuffer(t, n)
	cfg := sampler.DefaultPERConfig(0)
	s := newPER(t, buf, cfg)
	td := make([]float64, n)
	probs := make([]float64, n)
	sum := 0.0
	for i := range td {
		td[i] = 0.02 * float64(i*i%37+1) // uneven, some repeated
		probs[i] = math.Pow(td[i]+cfg.Eps, cfg.Alpha)
		sum += probs[i]
	}
	for i := range probs {
		probs[i] /= sum
	}
	fillPER(t, buf, s, td)
	counts := drawCounts(t, s, buf, seed, n, k, rounds)
	samplertest.ChiSquare(t, seed, counts, probs)
}

func TestPERAlphaZeroIsUniform(t *testing.T) {
	const n, k, rounds, seed = 40, 8, 10_000, 0xa1f0
	buf := samplertest.NewBuffer(t, n)
	cfg := sampler.DefaultPERConfig(0)
	cfg.Alpha = 0
	s := newPER(t, buf, cfg)
	td := make([]float64, n)
	probs := make([]float64, n)
	for i := range td {
		td[i] = float64(i) * float64(i) // 0 .. 1521: wildly uneven
		probs[i] = 1.0 / n
	}
	fillPER(t, buf, s, td)
	for slot := range n {
		if _, p, _ := buf.SlotPriority(slot); p != 1 {
			t.Fatalf("alpha=0 stored priority %v, want 1", p)
		}
	}
	samplertest.ChiSquare(t, seed, drawCounts(t, s, buf, seed, n, k, rounds), probs)
}

// TestPERImportanceWeightsExact is per-ners.md §5's closed form: priorities
// 1, 2, 3, 4 with alpha = 1, beta = 1 and N = 4 give w = 1, 1/2, 1/3, 1/4
// (normalised by the buffer maximum, the weight of priority 1).
func TestPERImportanceWeightsExact(t *testing.T) {
	buf := samplertest.NewBuffer(t, 4)
	cfg := sampler.PERConfig{Alpha: 1, Beta: sampler.Linear{Start: 1, End: 1}, Eps: 0, Normalize: buffer.NormalizeBuffer}
	s := newPER(t, buf, cfg)
	fillPER(t, buf, s, []float64{1, 2, 3, 4})
	prioOf := func(b *buffer.Batch, j int) float64 {
		_, p, _ := buf.SlotPriority(int(b.Refs[j].Slot))
		return p
	}
	rng := rand.New(rand.NewPCG(4, 4))
	b := samplertest.NewBatch(t, buf, 4)
	seen := map[float64]bool{}
	for range 50 {
		if err := s.Sample(rng, b); err != nil {
			t.Fatal(err)
		}
		if b.Size != 4 || b.Total != 10 || b.MinProb != 0.1 {
			t.Fatalf("batch Size %d Total %v MinProb %v, want 4, 10, 0.1", b.Size, b.Total, b.MinProb)
		}
		if err := s.Weights(b, 0); err != nil {
			t.Fatal(err)
		}
		for j := range 4 {
			p := prioOf(b, j)
			seen[p] = true
			if b.Prob[j] != p/10 {
				t.Errorf("row %d: Prob %v, want %v", j, b.Prob[j], p/10)
			}
			if want := 1 / p; math.Abs(b.Weight[j]-want) > 1e-12 {
				t.Errorf("priority %v: weight %v, want %v", p, b.Weight[j], want)
			}
		}
		// Unnormalised: (N·P)^-1 = 10/(4p).
		if err := b.ImportanceWeights(1, buffer.NormalizeNone); err != nil {
			t.Fatal(err)
		}
		for j := range 4 {
			if want := 2.5 / prioOf(b, j); math.Abs(b.Weight[j]-want) > 1e-12 {
				t.Errorf("NormalizeNone: weight %v, want %v", b.Weight[j], want)
			}
		}
	}
	if len(seen) != 4 {
		t.Errorf("50 stratified batches drew priorities %v, want all four", seen)
	}
}

// TestPERWeightsFollowSchedule checks beta = Beta.At(step) end to end:
// with NormalizeBuffer, w_i = (p_i / p_min)^-beta.
func TestPERWeightsFollowSchedule(t *testing.T) {
	const n, steps = 16, 1000
	buf := samplertest.NewBuffer(t, n)
	cfg := sampler.DefaultPERConfig(steps)
	s := newPER(t, buf, cfg)
	td := make([]float64, n)
	for i := range td {
		td[i] = 0.1 * float64(i+1)
	}
	fillPER(t, buf, s, td)
	pmin, _ := buf.MinPriority()
	rng := rand.New(rand.NewPCG(5, 5))
	b := samplertest.NewBatch(t, buf, 8)
	if err := s.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	for _, step := range []int64{0, steps / 2, steps, 10 * steps} {
		if err := s.Weights(b, step); err != nil {
			t.Fatal(err)
		}
		beta := cfg.Beta.At(step)
		for j := range b.Len() {
			_, p, _ := buf.SlotPriority(int(b.Refs[j].Slot))
			if want := math.Pow(p/pmin, -beta); math.Abs(b.Weight[j]-want) > 1e-12 {
				t.Errorf("step %d (beta %v) row %d: weight %v, want %v", step, beta, j, b.Weight[j], want)
			}
		}
	}
}

func TestPERNoAllocs(t *testing.T) {
	buf := samplertest.NewBuffer(t, 1024)
	samplertest.Insert(t, buf, 0, 1024, nil)
	s := newPER(t, buf, sampler.DefaultPERConfig(100))
	rng := rand.New(rand.NewPCG(6, 6))
	b := samplertest.NewBatch(t, buf, 32)
	td := make([]float64, 32)
	step := int64(0)
	cycle := func() {
		if err := s.Sample(rng, b); err != nil {
			t.Fatal(err)
		}
		if err := s.Weights(b, step); err != nil {
			t.Fatal(err)
		}
		for j := range td {
			td[j] = rng.Float64()
		}
		if _, err := s.Update(b.Refs, td); err != nil {
			t.Fatal(err)
		}
		step++
	}
	cycle()
	if a := testing.AllocsPerRun(50, cycle); a != 0 {
		t.Errorf("Sample+Weights+Update allocate %v times per batch", a)
	}
}

func TestAnnotate(t *testing.T) {
	buf := samplertest.NewBuffer(t, 8)
	s := newPER(t, buf, sampler.DefaultPERConfig(10))
	items := samplertest.Items(0, 3, nil)
	if err := sampler.Annotate(s, items, []float64{0.5, -1, 2}); err != nil {
		t.Fatal(err)
	}
	want := []float64{s.Priority(0.5), buf.MaxPriority(), s.Priority(2)}
	for i := range want {
		if items.Priority[i] != want[i] {
			t.Errorf("Priority[%d] = %v, want %v", i, items.Priority[i], want[i])
		}
	}
	if err := buf.Insert(items); err != nil {
		t.Fatal(err)
	}
	if err := sampler.Annotate(s, items, []float64{1, 2}); !errors.Is(err, buffer.ErrShape) {
		t.Errorf("2 errors for 3 items: %v, want ErrShape", err)
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		before := append([]float64(nil), items.Priority...)
		if err := sampler.Annotate(s, items, []float64{1, bad, 2}); !errors.Is(err, buffer.ErrPriority) {
			t.Errorf("absTD %v: %v, want ErrPriority", bad, err)
		}
		for i := range before {
			if items.Priority[i] != before[i] {
				t.Errorf("rejected Annotate changed Priority[%d]", i)
			}
		}
	}
}
