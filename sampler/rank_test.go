package sampler_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/badinput"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

func newRank(t testing.TB, buf *buffer.Buffer, cfg sampler.RankConfig) *sampler.Rank {
	t.Helper()
	r, err := sampler.NewRank(buf, cfg)
	if err != nil {
		t.Fatalf("NewRank: %v", err)
	}
	return r
}

func TestRankConformance(t *testing.T) {
	samplertest.Run(t, func(t *testing.T, buf *buffer.Buffer) sampler.Selector {
		return newRank(t, buf, sampler.DefaultRankConfig(100))
	}, samplertest.Options{PriorityBased: true})
}

// TestRankConformanceVariants runs the suite with an order that is always
// fresh and one that is only sorted when forced.
func TestRankConformanceVariants(t *testing.T) {
	for _, c := range []struct {
		name  string
		alpha float64
		frac  float64
		norm  buffer.Normalization
	}{
		{"always-fresh", 1.5, 0, buffer.NormalizeBatch},
		{"never-refreshed", 0.7, math.Inf(1), buffer.NormalizeBuffer},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := sampler.DefaultRankConfig(10)
			cfg.Alpha, cfg.RefreshFraction, cfg.Normalize = c.alpha, c.frac, c.norm
			samplertest.Run(t, func(t *testing.T, buf *buffer.Buffer) sampler.Selector {
				return newRank(t, buf, cfg)
			}, samplertest.Options{PriorityBased: true, Seed: 0xbeef})
		})
	}
}

func TestRankConfigValidation(t *testing.T) {
	buf := samplertest.NewBuffer(t, 8)
	ok := sampler.DefaultRankConfig(10)
	if ok.Alpha != 0.7 || ok.Beta != (sampler.Linear{Start: 0.5, End: 1, Steps: 10}) || ok.Eps != 1e-6 ||
		ok.Normalize != buffer.NormalizeBuffer || ok.RefreshFraction != 1 {
		t.Fatalf("DefaultRankConfig = %+v", ok)
	}
	nan := math.NaN()
	for name, mod := range map[string]func(*sampler.RankConfig){
		"alpha<0":   func(c *sampler.RankConfig) { c.Alpha = -1 },
		"alpha NaN": func(c *sampler.RankConfig) { c.Alpha = nan },
		"eps<0":     func(c *sampler.RankConfig) { c.Eps = -1 },
		"beta>1":    func(c *sampler.RankConfig) { c.Beta.End = 1.01 },
		"norm":      func(c *sampler.RankConfig) { c.Normalize = 5 },
		"refresh<0": func(c *sampler.RankConfig) { c.RefreshFraction = -0.1 },
		"refresh":   func(c *sampler.RankConfig) { c.RefreshFraction = nan },
	} {
		c := ok
		mod(&c)
		if _, err := sampler.NewRank(buf, c); !errors.Is(err, buffer.ErrConfig) {
			t.Errorf("%s: NewRank: %v, want ErrConfig", name, err)
		}
	}
	if _, err := sampler.NewRank(nil, ok); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("nil buffer: %v, want ErrConfig", err)
	}
	// Rank needs no min tree, even to normalise by the buffer maximum.
	noMin := samplertest.Config(8)
	noMin.NoMinTree = true
	nb, err := buffer.New(noMin)
	if err != nil {
		t.Fatal(err)
	}
	r := newRank(t, nb, ok)
	samplertest.Insert(t, nb, 0, 8, nil)
	b := samplertest.NewBatch(t, nb, 4)
	if err := r.Sample(rand.New(rand.NewPCG(1, 1)), b); err != nil {
		t.Fatal(err)
	}
	if err := r.Weights(b, 0); err != nil {
		t.Errorf("Weights without a min tree: %v", err)
	}
}

func TestRankPriority(t *testing.T) {
	buf := samplertest.NewBuffer(t, 8)
	r := newRank(t, buf, sampler.DefaultRankConfig(10))
	for _, d := range []float64{0, 0.25, 3} {
		if got := r.Priority(d); got != d+1e-6 {
			t.Errorf("Priority(%v) = %v, want |delta|+eps", d, got)
		}
	}
	if got := r.Priority(-1); got != buf.MaxPriority() {
		t.Errorf("Priority(-1) = %v, want MaxPriority %v", got, buf.MaxPriority())
	}
}

// checkBoundaries asserts the rule SegmentBoundaries documents against a
// brute-force oracle: each inner boundary is the b nearest to C(b) = s/k
// (smaller on a tie), clamped so that every segment is non-empty; and every
// segment's mass is within the largest item's mass of 1/k.
func checkBoundaries(t *testing.T, got []int, n, k int, alpha float64) {
	t.Helper()
	name := fmt.Sprintf("n=%d k=%d alpha=%v", n, k, alpha)
	pre := make([]float64, n+1)
	for r := 1; r <= n; r++ {
		pre[r] = pre[r-1] + math.Pow(float64(r), -alpha)
	}
	z := pre[n]
	if len(got) != k+1 || got[0] != 0 || got[k] != n {
		t.Fatalf("%s: boundaries %v, want k+1 = %d from 0 to n", name, got, k+1)
	}
	for s := 1; s <= k; s++ {
		if got[s] <= got[s-1] {
			t.Fatalf("%s: segment %d is empty: %v", name, s-1, got)
		}
	}
	for s := 1; s < k; s++ {
		target := float64(s) / float64(k) * z
		best := math.Inf(1)
		for b := 0; b <= n; b++ {
			best = min(best, math.Abs(pre[b]-target))
		}
		match := false
		for b := 0; b <= n && !match; b++ { // the nearest (ties within rounding)
			if math.Abs(pre[b]-target) <= best+1e-12*z {
				match = min(max(b, got[s-1]+1), n-(k-s)) == got[s]
			}
		}
		if !match {
			t.Fatalf("%s: boundary %d = %d (C = %v), not the clamped nearest to s/k = %v", name, s, got[s], pre[got[s]]/z, float64(s)/float64(k))
		}
	}
	m1 := 1 / z // the largest item's mass, rank 1
	for s := range k {
		mass := (pre[got[s+1]] - pre[got[s]]) / z
		if math.Abs(mass-1/float64(k)) > m1+1e-12 {
			t.Errorf("%s: segment %d [%d,%d) has mass %v, want 1/k = %v ± %v", name, s, got[s], got[s+1], mass, 1/float64(k), m1)
		}
	}
	if alpha == 0 {
		lo, hi := n, 0
		for s := range k {
			lo, hi = min(lo, got[s+1]-got[s]), max(hi, got[s+1]-got[s])
		}
		if hi-lo > 1 {
			t.Errorf("%s: alpha=0 segment sizes range over %d..%d", name, lo, hi)
		}
	}
}

func TestSegmentBoundaries(t *testing.T) {
	var dst []int
	for _, n := range []int{1, 2, 7, 32, 33, 100, 1000, 10_007} {
		for _, k := range []int{1, 2, 3, 8, 32} {
			if k > n {
				continue
			}
			for _, alpha := range []float64{0, 0.5, 0.7, 1, 2, 4} {
				var err error
				if dst, err = sampler.SegmentBoundaries(dst, n, k, alpha); err != nil {
					t.Fatal(err)
				}
				checkBoundaries(t, dst, n, k, alpha)
			}
		}
	}
}

// TestSegmentMassLargeN: with many items no clamping happens, so each
// boundary is within half of its straddled item's mass of s/k, and each
// segment's mass is 1/k to within those two half-items: far tighter than the
// largest item's mass.
func TestSegmentMassLargeN(t *testing.T) {
	const n, k, alpha = 100_000, 32, 0.7
	b, err := sampler.SegmentBoundaries(nil, n, k, alpha)
	if err != nil {
		t.Fatal(err)
	}
	checkBoundaries(t, b, n, k, alpha)
	pre := make([]float64, n+1)
	for r := 1; r <= n; r++ {
		pre[r] = pre[r-1] + math.Pow(float64(r), -alpha)
	}
	z := pre[n]
	if 1/z >= 1.0/k {
		t.Fatalf("largest item mass %v is not below 1/k", 1/z)
	}
	half := func(bd int) float64 { // bound on |C(bd) - s/k|
		if bd == 0 || bd == n {
			return 0
		}
		return math.Pow(float64(bd), -alpha) / z / 2 // rank bd weighs at least rank bd+1
	}
	for s := range k {
		mass := (pre[b[s+1]] - pre[b[s]]) / z
		if tol := half(b[s]) + half(b[s+1]); math.Abs(mass-1.0/k) > tol+1e-12 {
			t.Errorf("segment %d [%d,%d): mass %v, want 1/k ± %v", s, b[s], b[s+1], mass, tol)
		}
	}
}

func TestSegmentBoundariesErrors(t *testing.T) {
	for _, c := range []struct {
		n, k  int
		alpha float64
	}{{5, 0, 1}, {5, 6, 1}, {0, 1, 1}, {5, 2, -1}, {5, 2, math.NaN()}, {5, 2, math.Inf(1)}, {-3, -5, 1}, {math.MaxInt, 2, 1}} {
		err := badinput.NoPanic(t, "SegmentBoundaries", func() error {
			_, err := sampler.SegmentBoundaries(nil, c.n, c.k, c.alpha)
			return err
		})
		if !errors.Is(err, buffer.ErrConfig) || !strings.Contains(err.Error(), "need 1 <= k <= n") {
			t.Errorf("SegmentBoundaries(n=%d, k=%d, alpha=%v): %v, want ErrConfig", c.n, c.k, c.alpha, err)
		}
	}
}

// rankFill inserts n items into a buffer of capacity n and sets distinct
// |delta|s through the stage (item i gets td[i]).
func rankFill(t *testing.T, cfg sampler.RankConfig, td []float64) (*buffer.Buffer, *sampler.Rank) {
	t.Helper()
	buf := samplertest.NewBuffer(t, len(td))
	r := newRank(t, buf, cfg)
	fillPER(t, buf, r, td)
	return buf, r
}

// positions maps each slot to its 0-based position in r's rank order.
func positions(r *sampler.Rank, capacity int) []int {
	pos := make([]int, capacity)
	for i := range pos {
		pos[i] = -1
	}
	for i, slot := range r.Order(nil) {
		pos[slot] = i
	}
	return pos
}

func TestRankOnePerSegment(t *testing.T) {
	const n, k, seed = 200, 8, 0x5e6
	td := make([]float64, n)
	for i := range td {
		td[i] = float64((i*73)%n) / 10 // a permutation of distinct values
	}
	cfg := sampler.DefaultRankConfig(0)
	cfg.RefreshFraction = math.Inf(1)
	buf, r := rankFill(t, cfg, td)
	rng := rand.New(rand.NewPCG(seed, 1))
	b := samplertest.NewBatch(t, buf, k)
	if err := r.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	bounds := r.Boundaries(nil)
	if want, err := sampler.SegmentBoundaries(nil, n, k, cfg.Alpha); err != nil || !slices.Equal(bounds, want) {
		t.Fatalf("stage boundaries %v, SegmentBoundaries %v", bounds, want)
	}
	pos := positions(r, n)
	maxSeg := 0
	for j := range k {
		maxSeg = max(maxSeg, bounds[j+1]-bounds[j])
	}
	hits := make([]map[int]bool, k)
	for j := range hits {
		hits[j] = map[int]bool{}
	}
	for round := range 300 {
		if err := r.Sample(rng, b); err != nil {
			t.Fatal(err)
		}
		if b.Size != n || b.MinProb != 1/float64(k*maxSeg) {
			t.Fatalf("batch Size %d MinProb %v, want %d, %v", b.Size, b.MinProb, n, 1/float64(k*maxSeg))
		}
		for j := range k {
			p := pos[b.Refs[j].Slot]
			if p < bounds[j] || p >= bounds[j+1] {
				t.Fatalf("seed %#x round %d: row %d holds rank position %d, outside segment %d [%d,%d)", seed, round, j, p, j, bounds[j], bounds[j+1])
			}
			if want := 1 / float64(k*(bounds[j+1]-bounds[j])); b.Prob[j] != want {
				t.Fatalf("row %d: Prob %v, want 1/(k·|segment|) = %v", j, b.Prob[j], want)
			}
			hits[j][p] = true
		}
	}
	// Every position of a small segment is reached (draws are uniform in it).
	for j := range k {
		if size := bounds[j+1] - bounds[j]; size <= 10 && len(hits[j]) != size {
			t.Errorf("segment %d: %d of its %d positions drawn in 300 batches", j, len(hits[j]), size)
		}
	}
}

// rankChiSquare samples from r and tests the frequencies against the
// probabilities the stage uses, P(i) = 1/(k·|segment of i|).
func rankChiSquare(t *testing.T, buf *buffer.Buffer, r *sampler.Rank, seed uint64, n, k, rounds int) (probs []float64) {
	t.Helper()
	counts := drawCounts(t, r, buf, seed, n, k, rounds)
	bounds := r.Boundaries(nil)
	pos := positions(r, n)
	probs = make([]float64, n)
	g := samplertest.NewBatch(t, buf, 1)
	for slot := range n {
		ref, _, _ := buf.SlotPriority(slot)
		if !buf.GatherRef(g, 0, ref) {
			t.Fatalf("slot %d unreadable", slot)
		}
		p := pos[slot]
		s := segmentOf(bounds, p)
		probs[samplertest.ID(g, 0)] = 1 / float64(k*(bounds[s+1]-bounds[s]))
	}
	samplertest.ChiSquare(t, seed, counts, probs)
	return probs
}

// segmentOf returns the segment holding position p.
func segmentOf(bounds []int, p int) int {
	s, _ := slices.BinarySearch(bounds, p+1)
	return s - 1
}

func TestRankChiSquare(t *testing.T) {
	const n, k, seed = 60, 6, 0x2a7c
	td := make([]float64, n)
	for i := range td {
		td[i] = float64((i*17)%n) + 0.5
	}
	cfg := sampler.DefaultRankConfig(0)
	buf, r := rankFill(t, cfg, td)
	probs := rankChiSquare(t, buf, r, seed, n, k, 100_000/k)
	// The probabilities used follow the power law: the top-ranked item is
	// far likelier than the last.
	top, last := slices.Max(probs), slices.Min(probs)
	if !(top > 10*last) {
		t.Errorf("P(rank 1) = %v, P(rank N) = %v: not a power law", top, last)
	}
	// Item with the largest |delta| sits at rank 1, in the first segment.
	order := r.Order(nil)
	_, p0, _ := buf.SlotPriority(order[0])
	if want := slices.Max(td) + cfg.Eps; math.Abs(p0-want) > buf.Resolution() {
		t.Errorf("rank 1 has priority %v, want the largest |delta|+eps %v", p0, want)
	}
}

func TestRankAlphaZeroIsUniform(t *testing.T) {
	const n, k, seed = 60, 6, 0x0a0
	td := make([]float64, n)
	for i := range td {
		td[i] = float64(i * i)
	}
	cfg := sampler.DefaultRankConfig(0)
	cfg.Alpha = 0
	buf, r := rankFill(t, cfg, td)
	probs := rankChiSquare(t, buf, r, seed, n, k, 100_000/k)
	for i, p := range probs {
		if math.Abs(p-1.0/n) > 1e-15 {
			t.Fatalf("alpha=0: item %d has P = %v, want 1/%d", i, p, n)
		}
	}
}

func TestRankOrderAfterRefresh(t *testing.T) {
	const n = 100
	buf := samplertest.NewBuffer(t, n)
	cfg := sampler.DefaultRankConfig(0)
	cfg.RefreshFraction = math.Inf(1)
	r := newRank(t, buf, cfg)
	rng := rand.New(rand.NewPCG(7, 7))
	td := make([]float64, n)
	for i := range td {
		td[i] = float64(rng.IntN(20)) / 8 // many ties
	}
	fillPER(t, buf, r, td)
	check := func(wantRanked int) {
		t.Helper()
		order := r.Order(nil)
		if len(order) != wantRanked || r.Stats().Ranked != wantRanked {
			t.Fatalf("%d slots ranked (Stats %d), want %d", len(order), r.Stats().Ranked, wantRanked)
		}
		seen := map[int]bool{}
		prev, prevSlot := math.Inf(1), -1
		for i, slot := range order {
			if seen[slot] {
				t.Fatalf("slot %d ranked twice", slot)
			}
			seen[slot] = true
			_, p, _ := buf.SlotPriority(slot)
			if p <= 0 {
				t.Fatalf("rank %d: slot %d has priority %v", i+1, slot, p)
			}
			if p > prev || (p == prev && slot < prevSlot) {
				t.Fatalf("rank %d: slot %d (priority %v) after slot %d (priority %v)", i+1, slot, p, prevSlot, prev)
			}
			prev, prevSlot = p, slot
		}
	}
	r.Refresh()
	check(n)
	// Priorities changed behind the stage, some to 0: the next sort follows.
	refs := make([]buffer.Ref, 0, n)
	prio := make([]float64, 0, n)
	zeros := 0
	for slot := range n {
		ref, _, _ := buf.SlotPriority(slot)
		refs = append(refs, ref)
		p := rng.Float64()
		if slot%7 == 0 {
			p, zeros = 0, zeros+1
		}
		prio = append(prio, p)
	}
	if _, err := buf.UpdatePriorities(refs, prio); err != nil {
		t.Fatal(err)
	}
	r.Refresh()
	check(n - zeros)
}

// TestRankRefreshPolicy walks through the documented policy with
// RefreshFraction 0.5: a re-sort once inserts + updates since the last sort
// reach half the ranked items; new items (maximum priority) then rank first;
// boundaries are rebuilt only when N or k changes.
func TestRankRefreshPolicy(t *testing.T) {
	buf := samplertest.NewBuffer(t, 64)
	cfg := sampler.DefaultRankConfig(0)
	cfg.RefreshFraction = 0.5
	r := newRank(t, buf, cfg)
	rng := rand.New(rand.NewPCG(8, 8))
	b4, b5 := samplertest.NewBatch(t, buf, 4), samplertest.NewBatch(t, buf, 5)
	sample := func(b *buffer.Batch) {
		t.Helper()
		if err := r.Sample(rng, b); err != nil {
			t.Fatal(err)
		}
	}
	want := func(step string, refreshes, rebuilds uint64, ranked int) {
		t.Helper()
		st := r.Stats()
		if st.Refreshes != refreshes || st.Rebuilds != rebuilds || st.Ranked != ranked {
			t.Fatalf("%s: %d refreshes, %d rebuilds, %d ranked; want %d, %d, %d", step, st.Refreshes, st.Rebuilds, st.Ranked, refreshes, rebuilds, ranked)
		}
	}
	occupied := func() map[int]bool {
		m := map[int]bool{}
		for s := range buf.Capacity() {
			if _, _, ok := buf.SlotPriority(s); ok {
				m[s] = true
			}
		}
		return m
	}

	samplertest.Insert(t, buf, 0, 20, nil)
	sample(b4)
	want("first sample", 1, 1, 20)

	refs := make([]buffer.Ref, 0, 20)
	td := make([]float64, 0, 20)
	for s := range occupied() {
		ref, _, _ := buf.SlotPriority(s)
		refs = append(refs, ref)
		td = append(td, 0.01*float64(len(td)+1))
	}
	if _, err := r.Update(refs, td); err != nil {
		t.Fatal(err)
	}
	if p := r.Stats().Pending; p != 20 {
		t.Fatalf("pending %d after 20 updates", p)
	}
	sample(b4)
	want("after 20 updates", 2, 1, 20) // same N and k: no rebuild

	old := occupied()
	samplertest.Insert(t, buf, 20, 9, nil)
	sample(b4)
	want("9 inserts (< 10)", 2, 1, 20)
	for _, s := range r.Order(nil) {
		if !old[s] {
			t.Fatalf("new slot %d ranked before a re-sort", s)
		}
	}
	if p := r.Stats().Pending; p != 9 {
		t.Fatalf("pending %d, want 9", p)
	}

	samplertest.Insert(t, buf, 29, 1, nil)
	sample(b4)
	want("10 inserts", 3, 2, 30)
	for i, s := range r.Order(nil)[:10] {
		if old[s] {
			t.Errorf("rank %d is old slot %d; the 10 new items (max priority) should rank first", i+1, s)
		}
	}

	sample(b5)
	want("k 4 → 5", 3, 3, 30)
	sample(b5)
	want("k unchanged", 3, 3, 30)
}

func TestRankForcedRefresh(t *testing.T) {
	buf := samplertest.NewBuffer(t, 64)
	cfg := sampler.DefaultRankConfig(0)
	cfg.RefreshFraction = math.Inf(1)
	r := newRank(t, buf, cfg)
	rng := rand.New(rand.NewPCG(9, 9))
	samplertest.Insert(t, buf, 0, 10, nil)
	if err := r.Sample(rng, samplertest.NewBatch(t, buf, 4)); err != nil {
		t.Fatal(err)
	}
	samplertest.Insert(t, buf, 10, 10, nil)
	if err := r.Sample(rng, samplertest.NewBatch(t, buf, 4)); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Refreshes != 1 || st.Ranked != 10 || st.Pending != 10 {
		t.Fatalf("RefreshFraction=Inf re-sorted on its own: %+v", st)
	}
	// A batch larger than the ranked items forces a re-sort.
	if err := r.Sample(rng, samplertest.NewBatch(t, buf, 15)); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Refreshes != 2 || st.Ranked != 20 {
		t.Fatalf("batch of 15 over 10 ranked items: %+v, want a re-sort to 20", st)
	}
}

// TestRankSkipsZeroPriorityOccupants overwrites ranked slots with items of
// priority 0 while the order is stale: rows are re-drawn inside their
// segment (or, if a whole segment became unsampleable, the order is
// re-sorted), and no zero-priority item is ever returned.
func TestRankSkipsZeroPriorityOccupants(t *testing.T) {
	const seed = 0x2e70
	buf := samplertest.NewBuffer(t, 64)
	cfg := sampler.DefaultRankConfig(0)
	cfg.RefreshFraction = math.Inf(1)
	r := newRank(t, buf, cfg)
	rng := rand.New(rand.NewPCG(seed, 1))
	prio := make([]float64, 64)
	for i := range prio {
		prio[i] = 1 + float64(i)
	}
	samplertest.Insert(t, buf, 0, 64, prio)
	b := samplertest.NewBatch(t, buf, 8)
	if err := r.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	samplertest.Insert(t, buf, 64, 32, make([]float64, 32)) // half the slots, priority 0
	for round := range 200 {
		if err := r.Sample(rng, b); err != nil {
			t.Fatalf("seed %#x round %d: %v", seed, round, err)
		}
		for j := range b.Len() {
			if id := samplertest.ID(b, j); id >= 64 {
				t.Fatalf("seed %#x round %d row %d: drew zero-priority item %d", seed, round, j, id)
			}
		}
	}
	if st := r.Stats(); st.Redraws == 0 {
		t.Errorf("no re-draws counted: %+v", st)
	}
}

func TestRankImportanceWeights(t *testing.T) {
	const n, k, steps = 50, 8, 100
	td := make([]float64, n)
	for i := range td {
		td[i] = float64(i) + 0.25
	}
	cfg := sampler.DefaultRankConfig(steps)
	buf, r := rankFill(t, cfg, td)
	rng := rand.New(rand.NewPCG(10, 10))
	b := samplertest.NewBatch(t, buf, k)
	if err := r.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	bounds := r.Boundaries(nil)
	seg := func(j int) float64 { return float64(bounds[j+1] - bounds[j]) }
	maxSeg, batchMax := 0.0, 0.0
	for j := range k {
		maxSeg = max(maxSeg, seg(j))
		batchMax = max(batchMax, seg(j))
	}
	for _, step := range []int64{0, steps / 2, steps} {
		beta := cfg.Beta.At(step)
		if err := r.Weights(b, step); err != nil {
			t.Fatal(err)
		}
		for j := range k {
			// (N·P)^-beta / max with P = 1/(k·|seg|): (|seg_j| / max|seg|)^beta.
			if want := math.Pow(seg(j)/maxSeg, beta); math.Abs(b.Weight[j]-want) > 1e-12 {
				t.Errorf("step %d row %d: weight %v, want %v", step, j, b.Weight[j], want)
			}
		}
		if err := b.ImportanceWeights(beta, buffer.NormalizeBatch); err != nil {
			t.Fatal(err)
		}
		for j := range k {
			if want := math.Pow(seg(j)/batchMax, beta); math.Abs(b.Weight[j]-want) > 1e-12 {
				t.Errorf("batch-normalised step %d row %d: weight %v, want %v", step, j, b.Weight[j], want)
			}
		}
	}
	if cfg.Beta.At(0) != 0.5 || cfg.Beta.At(steps) != 1 {
		t.Errorf("rank beta schedule b(0)=%v b(T)=%v, want 0.5, 1", cfg.Beta.At(0), cfg.Beta.At(steps))
	}
}

func TestRankNoAllocs(t *testing.T) {
	buf := samplertest.NewBuffer(t, 1024)
	samplertest.Insert(t, buf, 0, 1024, nil)
	r := newRank(t, buf, sampler.DefaultRankConfig(100))
	rng := rand.New(rand.NewPCG(11, 11))
	b := samplertest.NewBatch(t, buf, 32)
	td := make([]float64, 32)
	step := int64(0)
	cycle := func() {
		if err := r.Sample(rng, b); err != nil {
			t.Fatal(err)
		}
		if err := r.Weights(b, step); err != nil {
			t.Fatal(err)
		}
		for j := range td {
			td[j] = rng.Float64()
		}
		if _, err := r.Update(b.Refs, td); err != nil {
			t.Fatal(err)
		}
		step++
	}
	cycle()
	before := r.Stats().Refreshes
	if a := testing.AllocsPerRun(50, cycle); a != 0 {
		t.Errorf("Sample+Weights+Update allocate %v times per batch", a)
	}
	if r.Stats().Refreshes == before {
		t.Errorf("no re-sort happened during the allocation check")
	}
}
