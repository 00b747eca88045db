package sampler_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// newNERS builds a NERS stage over buf or fails the test.
func newNERS(t testing.TB, buf *buffer.Buffer, cfg sampler.NERSConfig) *sampler.NERS {
	t.Helper()
	s, err := sampler.NewNERS(buf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// nersReport samples a batch of n rows and reports Q = 0.1·id and y =
// 0.2·id + 1 for each, returning the batch.
func nersReport(t testing.TB, s *sampler.NERS, buf *buffer.Buffer, rng *rand.Rand, n int) *buffer.Batch {
	t.Helper()
	b := samplertest.NewBatch(t, buf, n)
	if err := s.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	q, y := make([]float64, n), make([]float64, n)
	for i := range n {
		id := float64(samplertest.ID(b, i))
		q[i], y[i] = 0.1*id, 0.2*id+1
	}
	if _, err := s.UpdateFeatures(b.Refs, q, y); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNERSConfigErrors(t *testing.T) {
	buf := samplertest.NewBuffer(t, 16)
	for name, c := range map[string]sampler.NERSConfig{
		"alpha NaN":         {Alpha: math.NaN()},
		"alpha negative":    {Alpha: -1},
		"beta above 1":      {Beta: sampler.Linear{Start: 0.4, End: 1.5}},
		"interval negative": {Interval: -1},
		"train negative":    {TrainSize: -3},
		"history small":     {TrainSize: 64, History: 32},
		"horizon negative":  {Horizon: -200},
		"scale NaN":         {ActionScale: math.NaN()},
		"scale negative":    {ActionScale: -2},
		"net in":            {Net: sampler.NERSNetConfig{In: 3}},
		"net floor":         {Net: sampler.NERSNetConfig{Floor: 2}},
		"norm":              {Normalize: buffer.Normalization(9)},
	} {
		if _, err := sampler.NewNERS(buf, c); !errors.Is(err, buffer.ErrConfig) {
			t.Errorf("%s: err %v, want ErrConfig", name, err)
		}
	}
	noMin, err := buffer.New(buffer.Config{Capacity: 16, ObsDim: 2, NumActions: 4, NoMinTree: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sampler.NewNERS(noMin, sampler.DefaultNERSConfig(10)); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("NormalizeBuffer without a min tree: err %v, want ErrConfig", err)
	}
	if _, err := sampler.NewNERS(nil, sampler.NERSConfig{}); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("nil buffer: err %v, want ErrConfig", err)
	}
	s := newNERS(t, buf, sampler.NERSConfig{})
	if c := s.Config(); c.Alpha != 0.5 || c.Interval != 1000 || c.TrainSize != 128 || c.ActionScale != 1 || c.Net.In != s.Width() || s.Width() != 2*2+4+5 {
		t.Errorf("defaults %+v, width %d", c, s.Width())
	}
}

// TestNERSPrioritiesAreScores: after UpdateFeatures each row's stored
// priority is score^alpha of the batch scored as a set, every new item
// enters with priority 1, and the weights are the buffer's importance
// weights of the probabilities used.
func TestNERSPrioritiesAreScores(t *testing.T) {
	buf := samplertest.NewBuffer(t, 64)
	samplertest.Insert(t, buf, 0, 64, nil)
	for slot := range 64 {
		if _, p, ok := buf.SlotPriority(slot); !ok || p != 1 {
			t.Fatalf("slot %d: new item's priority %v, want 1", slot, p)
		}
	}
	s := newNERS(t, buf, sampler.NERSConfig{Alpha: 0.7, Normalize: buffer.NormalizeBatch, Seed: 3})
	if p := s.Priority(5); p != 1 {
		t.Errorf("Priority(5) = %v, want 1", p)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	b := samplertest.NewBatch(t, buf, 16)
	if err := s.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	q, y := make([]float64, 16), make([]float64, 16)
	for i := range q {
		q[i], y[i] = rng.NormFloat64(), rng.NormFloat64()
	}
	res, err := s.UpdateFeatures(b.Refs, q, y)
	if err != nil || res.Applied != 16 {
		t.Fatalf("UpdateFeatures: %+v, %v", res, err)
	}
	// The stage's inputs for the batch now (the moments include it) give
	// the scores it wrote.
	x := sampler.NERSInputs(s, b, 16, q, y)
	scores := append([]float64(nil), s.Net().Scores(x)...)
	seen := map[uint32]bool{}
	for i, r := range b.Refs {
		if seen[r.Slot] {
			continue // a duplicate row: the last write wins
		}
		seen[r.Slot] = true
		want := math.Pow(scores[lastRow(b, r)], 0.7)
		if _, p, _ := buf.SlotPriority(int(r.Slot)); math.Abs(p-want) > 2*buf.Resolution()+1e-9*want {
			t.Errorf("row %d slot %d: priority %v, want score^alpha %v", i, r.Slot, p, want)
		}
	}
	st := s.Stats()
	if !(st.ScoreMin > 0 && st.ScoreMin <= st.ScoreMean && st.ScoreMean <= st.ScoreMax && st.ScoreMax <= 1) {
		t.Errorf("score stats %+v", st)
	}
	if err := s.Weights(b, 0); err != nil {
		t.Fatal(err)
	}
	wmax := 0.0
	for _, p := range b.Prob {
		wmax = max(wmax, math.Pow(float64(b.Size)*p, -0.4))
	}
	for i, w := range b.Weight {
		if want := math.Pow(float64(b.Size)*b.Prob[i], -0.4) / wmax; math.Abs(w-want) > 1e-12 {
			t.Errorf("row %d: weight %v, want %v", i, w, want)
		}
	}
}

// lastRow is the last row of b holding r's slot.
func lastRow(b *buffer.Batch, r buffer.Ref) int {
	last := -1
	for i, x := range b.Refs {
		if x == r {
			last = i
		}
	}
	return last
}

// TestNERSFeatures: a row's raw features are s, the one-hot action, r, s',
// the time feature, then δ = y − Q, Q and y once reported, and 1.0 (the
// scorer's input) before; with AbsTD the δ feature is |δ|.
func TestNERSFeatures(t *testing.T) {
	for _, abs := range []bool{false, true} {
		buf := samplertest.NewBuffer(t, 8)
		samplertest.Insert(t, buf, 0, 8, nil)
		s := newNERS(t, buf, sampler.NERSConfig{AbsTD: abs})
		b := samplertest.NewBatch(t, buf, 4)
		rng := rand.New(rand.NewPCG(5, 5))
		if err := s.Sample(rng, b); err != nil {
			t.Fatal(err)
		}
		w := s.Width()
		raw := sampler.NERSRawFeatures(s, b, 4)
		in := sampler.NERSInputs(s, b, 4, nil, nil)
		for i := range 4 {
			id := float64(samplertest.ID(b, i))
			want := []float64{id, -id, 0, 0, 0, 0, id, id + 0.5, -id, 0}
			want[2+int(id)%samplertest.NumActions] = 1
			for j, v := range want {
				if raw[i*w+j] != v {
					t.Fatalf("row %d (id %v) feature %d = %v, want %v (row %v)", i, id, j, raw[i*w+j], v, raw[i*w:(i+1)*w])
				}
			}
			for j := w - 3; j < w; j++ {
				if !math.IsNaN(raw[i*w+j]) || in[i*w+j] != 1 {
					t.Fatalf("fresh row %d feature %d: raw %v, input %v; want NaN and 1", i, j, raw[i*w+j], in[i*w+j])
				}
			}
		}
		q, y := []float64{1, 2, 3, 4}, []float64{0.5, 2.5, 3, 2}
		if _, err := s.UpdateFeatures(b.Refs, q, y); err != nil {
			t.Fatal(err)
		}
		raw = sampler.NERSRawFeatures(s, b, 4)
		for i := range 4 {
			r := lastRow(b, b.Refs[i])
			d := y[r] - q[r]
			if abs {
				d = math.Abs(d)
			}
			if got := raw[i*w+w-3 : i*w+w]; got[0] != d || got[1] != q[r] || got[2] != y[r] {
				t.Errorf("abs=%v row %d: δ, Q, y features %v, want %v %v %v", abs, i, got, d, q[r], y[r])
			}
		}
	}
}

// TestNERSTimeAndContinuousFeatures: with episode columns and a horizon
// the time feature is EpisodeStep/Horizon; continuous actions are divided
// by ActionScale.
func TestNERSTimeAndContinuousFeatures(t *testing.T) {
	buf, err := buffer.New(buffer.Config{Capacity: 8, ObsDim: 1, Action: buffer.Continuous, ActionDim: 2, Episode: true})
	if err != nil {
		t.Fatal(err)
	}
	tr := &buffer.Transitions{Obs: make([]float32, 8), NextObs: make([]float32, 8), ActionVec: make([]float32, 16),
		Reward: make([]float32, 8), Discount: make([]float32, 8), EpisodeID: make([]uint64, 8), EpisodeStep: make([]int32, 8)}
	for i := range 8 {
		tr.Obs[i], tr.ActionVec[2*i], tr.ActionVec[2*i+1], tr.EpisodeStep[i], tr.Discount[i] = float32(i), 2, -4, int32(10*i), 0.9
	}
	if err := buf.Insert(tr); err != nil {
		t.Fatal(err)
	}
	s := newNERS(t, buf, sampler.NERSConfig{Horizon: 200, ActionScale: 2})
	if s.Width() != 2+2+5 {
		t.Fatalf("width %d", s.Width())
	}
	b := samplertest.NewBatch(t, buf, 3)
	if err := s.Sample(rand.New(rand.NewPCG(1, 1)), b); err != nil {
		t.Fatal(err)
	}
	raw := sampler.NERSRawFeatures(s, b, 3)
	for i := range 3 {
		row := raw[i*9 : (i+1)*9]
		if row[1] != 1 || row[2] != -2 || row[5] != float64(b.EpisodeStep[i])/200 {
			t.Errorf("row %d: %v (step %d)", i, row, b.EpisodeStep[i])
		}
	}
}

func TestNERSUpdateFeaturesErrors(t *testing.T) {
	buf := samplertest.NewBuffer(t, 16)
	samplertest.Insert(t, buf, 0, 16, nil)
	s := newNERS(t, buf, sampler.NERSConfig{})
	if _, err := s.UpdateFeatures(nil, nil, nil); !errors.Is(err, buffer.ErrShape) {
		t.Errorf("before any Sample: %v, want ErrShape", err)
	}
	b := samplertest.NewBatch(t, buf, 4)
	if err := s.Sample(rand.New(rand.NewPCG(2, 2)), b); err != nil {
		t.Fatal(err)
	}
	var before []float64
	for slot := range 16 {
		_, p, _ := buf.SlotPriority(slot)
		before = append(before, p)
	}
	ok := []float64{1, 2, 3, 4}
	other := append([]buffer.Ref(nil), b.Refs...)
	other[2].Gen += 2
	for name, call := range map[string]func() error{
		"short q":      func() error { _, err := s.UpdateFeatures(b.Refs, ok[:3], ok); return err },
		"short refs":   func() error { _, err := s.UpdateFeatures(b.Refs[:3], ok[:3], ok[:3]); return err },
		"other refs":   func() error { _, err := s.UpdateFeatures(other, ok, ok); return err },
		"NaN target":   func() error { _, err := s.UpdateFeatures(b.Refs, ok, []float64{1, math.NaN(), 1, 1}); return err },
		"Inf Q":        func() error { _, err := s.UpdateFeatures(b.Refs, []float64{1, 1, math.Inf(-1), 1}, ok); return err },
		"plain Update": func() error { _, err := s.Update(b.Refs, ok); return err },
	} {
		err := call()
		want := buffer.ErrShape
		switch name {
		case "NaN target", "Inf Q":
			want = buffer.ErrPriority
		case "plain Update":
			want = buffer.ErrConfig
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: err %v, want %v", name, err, want)
		}
	}
	for slot := range 16 {
		if _, p, _ := buf.SlotPriority(slot); p != before[slot] {
			t.Errorf("slot %d: priority changed from %v to %v by refused calls", slot, before[slot], p)
		}
	}
	if got := s.Priority(math.NaN()); !math.IsNaN(got) {
		t.Errorf("Priority(NaN) = %v, want NaN (Insert refuses it)", got)
	}
}

// TestNERSEvaluationCycle: the first evaluation sets the baseline, one
// sooner than Interval steps after it is ignored, the next trains the
// scorer once on r_re = its return − the baseline and empties the
// history; a non-finite return is refused.
func TestNERSEvaluationCycle(t *testing.T) {
	buf := samplertest.NewBuffer(t, 64)
	samplertest.Insert(t, buf, 0, 64, nil)
	s := newNERS(t, buf, sampler.NERSConfig{Interval: 10, TrainSize: 16, Seed: 9})
	rng := rand.New(rand.NewPCG(3, 3))
	if err := s.Evaluated(math.NaN()); err == nil {
		t.Error("Evaluated(NaN) accepted")
	}
	params := func() []float64 {
		var out []float64
		for _, p := range s.Net().Params() {
			out = append(out, p...)
		}
		return out
	}
	p0 := params()
	if err := s.Evaluated(-100); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		nersReport(t, s, buf, rng, 8)
	}
	if h, seen := sampler.NERSHistory(s); len(h) != 40 || seen != 40 {
		t.Fatalf("history after the baseline and 5 batches: %d refs, %d seen; want 40", len(h), seen)
	}
	if err := s.Evaluated(-50); err != nil {
		t.Fatal(err)
	}
	nersReport(t, s, buf, rng, 8) // 5 steps since the baseline: ignored
	if st := s.Stats(); st.Ignored != 1 || st.Updates != 0 {
		t.Fatalf("stats %+v: want one ignored evaluation, no update", st)
	}
	for range 5 {
		nersReport(t, s, buf, rng, 8)
	}
	if err := s.Evaluated(-70); err != nil {
		t.Fatal(err)
	}
	b := samplertest.NewBatch(t, buf, 8)
	if err := s.Sample(rng, b); err != nil { // applies the evaluation first
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Updates != 1 || st.Reward != 30 || st.TrainRows != 16 {
		t.Fatalf("stats %+v: want one update with r_re = -70 - (-100) = 30 on 16 rows", st)
	}
	if h, seen := sampler.NERSHistory(s); len(h) != 8 || seen != 8 {
		t.Errorf("history after the update and one batch: %d refs, %d seen; want 8", len(h), seen)
	}
	moved := false
	for i, v := range params() {
		moved = moved || v != p0[i]
	}
	if !moved {
		t.Error("the scorer's parameters did not change")
	}
}

// TestNERSDropsOverwrittenTrainRefs: refs in the history whose slot was
// overwritten are not trained on.
func TestNERSDropsOverwrittenTrainRefs(t *testing.T) {
	buf := samplertest.NewBuffer(t, 16)
	samplertest.Insert(t, buf, 0, 16, nil)
	s := newNERS(t, buf, sampler.NERSConfig{Interval: 1, TrainSize: 8})
	rng := rand.New(rand.NewPCG(6, 6))
	if err := s.Evaluated(0); err != nil {
		t.Fatal(err)
	}
	nersReport(t, s, buf, rng, 4)
	nersReport(t, s, buf, rng, 4)
	samplertest.Insert(t, buf, 100, 16, nil) // overwrites every slot
	if err := s.Evaluated(1); err != nil {
		t.Fatal(err)
	}
	nersReport(t, s, buf, rng, 4)
	if st := s.Stats(); st.Updates != 0 || st.Dropped != 32 {
		t.Errorf("stats %+v: want no update and 4·8 = 32 dropped draws", st)
	}
}

// TestNERSHistoryReservoir: once more refs are offered than the history
// holds, it keeps a uniform sample of them: of N = 20·H offered refs, the
// share kept from the first half is 1/2 within 5 standard deviations of
// the hypergeometric count (seeded).
func TestNERSHistoryReservoir(t *testing.T) {
	const h, n = 400, 8000
	buf := samplertest.NewBuffer(t, 16)
	seed := uint64(7)
	s := newNERS(t, buf, sampler.NERSConfig{History: h, TrainSize: 8, Seed: seed})
	for i := range n {
		sampler.NERSOffer(s, buffer.Ref{Slot: uint32(i)})
	}
	kept, seen := sampler.NERSHistory(s)
	if len(kept) != h || seen != n {
		t.Fatalf("history %d refs, %d seen; want %d and %d", len(kept), seen, h, n)
	}
	first, dup := 0, map[uint32]bool{}
	for _, r := range kept {
		if dup[r.Slot] {
			t.Fatalf("ref %d kept twice", r.Slot)
		}
		dup[r.Slot] = true
		if r.Slot < n/2 {
			first++
		}
	}
	sd := math.Sqrt(h * 0.25 * float64(n-h) / float64(n-1))
	if math.Abs(float64(first)-h/2) > 5*sd {
		t.Errorf("seed %d: %d of %d kept refs from the first half, want %d ± %.1f", seed, first, h, h/2, 5*sd)
	}
}

// TestNERSMethod: NewMethod builds ners with the requested loss and
// importance weights, and NoIS drops them.
func TestNERSMethod(t *testing.T) {
	buf := samplertest.NewBuffer(t, 16)
	m, err := sampler.NewMethod("ners", buf, sampler.MethodConfig{BetaSteps: 100, Loss: model.Loss{Kind: model.MSE}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Selector.(*sampler.NERS); !ok || m.Weighter == nil || m.Loss.Kind != model.MSE {
		t.Errorf("method %v", m)
	}
	if _, ok := m.Selector.(sampler.FeatureUpdater); !ok {
		t.Error("ners is not a FeatureUpdater")
	}
	if _, ok := m.Selector.(sampler.EvaluationHook); !ok {
		t.Error("ners is not an EvaluationHook")
	}
	m, err = sampler.NewMethod("ners", buf, sampler.MethodConfig{NoIS: true})
	if err != nil || m.Weighter != nil {
		t.Errorf("NoIS: %v, weighter %v", err, m.Weighter)
	}
	if _, err := sampler.NewMethod("ners", buf, sampler.MethodConfig{Loss: model.Loss{Kind: model.PAL, Delta: 1, Alpha: 0.4}}); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("ners with the PAL loss: %v, want ErrConfig", err)
	}
}

// TestNERSSaveLoad: a stage restored from Save continues exactly as the
// original (the same scores, priorities, updates and scorer); a damaged
// stream or one for another layout is refused and leaves the stage as it
// was.
func TestNERSSaveLoad(t *testing.T) {
	cfg := sampler.NERSConfig{Interval: 3, TrainSize: 8, History: 32, Seed: 11}
	mk := func() (*buffer.Buffer, *sampler.NERS) {
		buf := samplertest.NewBuffer(t, 64)
		samplertest.Insert(t, buf, 0, 64, nil)
		return buf, newNERS(t, buf, cfg)
	}
	bufA, a := mk()
	pcgA := rand.NewPCG(12, 12)
	rngA := rand.New(pcgA)
	for k := range 8 {
		nersReport(t, a, bufA, rngA, 8)
		if k%3 == 0 {
			if err := a.Evaluated(float64(10 * k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 3 { // a fuller history
		nersReport(t, a, bufA, rngA, 8)
	}
	if err := a.Evaluated(123); err != nil { // pending at the save
		t.Fatal(err)
	}
	var saved bytes.Buffer
	if err := a.Save(&saved); err != nil {
		t.Fatal(err)
	}
	savedHist, _ := sampler.NERSHistory(a)
	// B: the same buffer contents (priorities included) and the stage's
	// saved state.
	var bb bytes.Buffer
	if err := bufA.Save(&bb); err != nil {
		t.Fatal(err)
	}
	bufB, err := buffer.Load(&bb)
	if err != nil {
		t.Fatal(err)
	}
	b := newNERS(t, bufB, cfg)
	if err := b.Load(bytes.NewReader(saved.Bytes())); err != nil {
		t.Fatal(err)
	}
	pcgB := *pcgA // the same point of the same stream
	rngB := rand.New(&pcgB)
	for k := range 8 {
		ba := nersReport(t, a, bufA, rngA, 8)
		bb := nersReport(t, b, bufB, rngB, 8)
		for i := range ba.Refs {
			_, pa, _ := bufA.SlotPriority(int(ba.Refs[i].Slot))
			_, pb, _ := bufB.SlotPriority(int(bb.Refs[i].Slot))
			if ba.Refs[i] != bb.Refs[i] || pa != pb {
				t.Fatalf("step %d row %d: original %v priority %v, restored %v priority %v", k, i, ba.Refs[i], pa, bb.Refs[i], pb)
			}
		}
		if k == 4 {
			if err := errors.Join(a.Evaluated(200), b.Evaluated(200)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if sa, sb := a.Stats(), b.Stats(); sa != sb || sa.Updates < 2 {
		t.Fatalf("stats differ or too few updates: %+v / %+v", sa, sb)
	}
	pa, pb := a.Net().Params(), b.Net().Params()
	for i := range pa {
		for j := range pa[i] {
			if pa[i][j] != pb[i][j] {
				t.Fatalf("scorer parameter %d/%d: %v vs %v", i, j, pa[i][j], pb[i][j])
			}
		}
	}

	// Refusals leave the stage unchanged.
	before := b.Stats()
	damaged := append([]byte(nil), saved.Bytes()...)
	damaged[40] ^= 0xff
	if err := b.Load(bytes.NewReader(damaged)); !errors.Is(err, buffer.ErrCorrupt) {
		t.Errorf("damaged stream: %v, want ErrCorrupt", err)
	}
	if err := b.Load(bytes.NewReader(saved.Bytes()[:30])); !errors.Is(err, buffer.ErrCorrupt) {
		t.Errorf("truncated stream: %v, want ErrCorrupt", err)
	}
	other := newNERS(t, samplertest.NewBuffer(t, 32), cfg)
	if err := other.Load(bytes.NewReader(saved.Bytes())); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("another capacity: %v, want ErrConfig", err)
	}
	small := cfg
	small.History = len(savedHist) - 1
	if len(savedHist) <= small.TrainSize {
		t.Fatalf("the saved history holds %d refs; the test needs more than TrainSize %d", len(savedHist), small.TrainSize)
	}
	if err := newNERS(t, bufB, small).Load(bytes.NewReader(saved.Bytes())); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("a History of %d for %d saved refs: %v, want ErrConfig", small.History, len(savedHist), err)
	}
	// A well-formed stream whose state breaks an invariant is refused.
	sampler.NERSBreak(a, "gen")
	var broken bytes.Buffer
	if err := a.Save(&broken); err != nil {
		t.Fatal(err)
	}
	if err := b.Load(bytes.NewReader(broken.Bytes())); !errors.Is(err, buffer.ErrCorrupt) {
		t.Errorf("a state with an odd generation: %v, want ErrCorrupt", err)
	}
	if b.Stats() != before {
		t.Error("a refused Load changed the stage")
	}
}

// TestNERSInvariants: the checker passes on a working stage and catches
// each kind of broken invariant.
func TestNERSInvariants(t *testing.T) {
	for _, what := range []string{"", "gen", "history", "moments", "steps"} {
		buf := samplertest.NewBuffer(t, 32)
		samplertest.Insert(t, buf, 0, 32, nil)
		s := newNERS(t, buf, sampler.NERSConfig{TrainSize: 4, History: 16})
		nersReport(t, s, buf, rand.New(rand.NewPCG(1, 1)), 8)
		sampler.NERSBreak(s, what)
		if err := sampler.CheckNERS(s); (err == nil) != (what == "") {
			t.Errorf("broken %q: check says %v", what, err)
		}
	}
}

// TestNERSDuplicateSlotAndHugeValues: a batch holding one slot twice, at
// two generations (an overwrite between the draws), is scored from each
// row's own report and leaves the moments finite; a Q beyond float32's
// range is refused with nothing applied.
func TestNERSDuplicateSlotAndHugeValues(t *testing.T) {
	buf := samplertest.NewBuffer(t, 64)
	samplertest.Insert(t, buf, 0, 64, nil)
	s := newNERS(t, buf, sampler.NERSConfig{})
	rng := rand.New(rand.NewPCG(21, 21))
	b := samplertest.NewBatch(t, buf, 8)
	if err := s.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	b.Refs[1] = buffer.Ref{Slot: b.Refs[0].Slot, Gen: b.Refs[0].Gen + 2} // as if overwritten between the two draws
	q, y := []float64{1, 2, 3, 4, 5, 6, 7, 8}, []float64{2, 2, 2, 2, 2, 2, 2, 2}
	res, err := s.UpdateFeatures(b.Refs, q, y)
	if err != nil || res.Stale != 1 {
		t.Fatalf("UpdateFeatures: %+v, %v; want one stale row", res, err)
	}
	if err := sampler.CheckNERS(s); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		nersReport(t, s, buf, rng, 8) // later batches still score to finite priorities
		if st := s.Stats(); !(st.ScoreMin > 0 && st.ScoreMax <= 1) {
			t.Fatalf("batch %d after the duplicate: scores %+v", i, st)
		}
	}

	if err := s.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	var before []float64
	for slot := range 64 {
		_, p, _ := buf.SlotPriority(slot)
		before = append(before, p)
	}
	stats := s.Stats()
	q[3] = 1e39 // finite as a float64, +Inf in the float32 store
	if _, err := s.UpdateFeatures(b.Refs, q, y); !errors.Is(err, buffer.ErrPriority) {
		t.Fatalf("Q = 1e39: %v, want ErrPriority", err)
	}
	for slot := range 64 {
		if _, p, _ := buf.SlotPriority(slot); p != before[slot] {
			t.Fatalf("slot %d: priority changed by a refused call", slot)
		}
	}
	if s.Stats() != stats {
		t.Error("a refused call changed the stage's stats")
	}
	if err := sampler.CheckNERS(s); err != nil {
		t.Fatal(err)
	}
}

// TestNERSNormalizeTrain: with NormalizeTrain the evaluation cycle trains
// the scorer through the batch-normalised loss.
func TestNERSNormalizeTrain(t *testing.T) {
	buf := samplertest.NewBuffer(t, 64)
	samplertest.Insert(t, buf, 0, 64, nil)
	s := newNERS(t, buf, sampler.NERSConfig{Interval: 2, TrainSize: 16, NormalizeTrain: true, Seed: 4})
	rng := rand.New(rand.NewPCG(5, 5))
	p0 := slices.Clone(s.Net().Params()[0])
	for _, ret := range []float64{-100, 0, -20} {
		if err := s.Evaluated(ret); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			nersReport(t, s, buf, rng, 8)
		}
	}
	st := s.Stats()
	// Baseline −100; +100 trains; −20 trains on −20.
	if st.Updates != 2 || st.Reward != -20 {
		t.Fatalf("stats %+v: want 2 updates, the last on r_re = -20", st)
	}
	if slices.Equal(p0, s.Net().Params()[0]) {
		t.Error("the scorer did not change")
	}
}
