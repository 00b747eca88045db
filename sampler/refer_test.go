package sampler_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

func TestREFERConfigErrors(t *testing.T) {
	buf := newREFERBuffer(t, 64, 1)
	for _, c := range []sampler.REFERConfig{
		{Variant: 9}, {C: -1}, {D: 1}, {D: -0.1}, {A: -1}, {TotalSteps: -1}, {MaxSteps: -1}, {MaxSteps: 65},
		{BetaRate: 1.5}, {Beta0: 2}, {RecountEvery: -1}, {RhoClip: 0.5},
	} {
		if _, err := sampler.NewREFER(buf, c); !errors.Is(err, buffer.ErrConfig) {
			t.Errorf("%+v: error %v, want ErrConfig", c, err)
		}
	}
	disc, _ := buffer.New(buffer.Config{Capacity: 64, ObsDim: 2, Episode: true})
	if _, err := sampler.NewREFER(disc, sampler.REFERConfig{}); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("discrete buffer: %v", err)
	}
	r := newREFER(t, buf, sampler.REFERConfig{TotalSteps: 1000})
	c := r.Config()
	if c.C != 4 || c.D != 0.1 || c.A != 0.005 || c.MaxSteps != 56 || c.RecountEvery != 1000 || c.Beta0 != 0 || !math.IsInf(c.RhoClip, 1) {
		t.Errorf("defaults: %+v", c)
	}
	if r2 := newREFER(t, buf, sampler.REFERConfig{Variant: sampler.REFERPenaltyOnly}); r2.Config().RhoClip != 1e3 || r2.Config().A != 5e-7 {
		t.Errorf("refer-2: rho clip %v, A %v", r2.Config().RhoClip, r2.Config().A)
	}
	if r.String() == "" || r.Priority(3) != 1 {
		t.Error("String or Priority")
	}
}

// TestREFERWholeEpisodesOnly: an episode is sampleable only once its last
// step and all the others have arrived.
func TestREFERWholeEpisodesOnly(t *testing.T) {
	buf := newREFERBuffer(t, 256, 4)
	r := newREFER(t, buf, sampler.REFERConfig{})
	rng := rand.New(rand.NewPCG(1, 1))
	ep := samplertest.Episode{ID: 7, Reward: make([]float32, 10), End: buffer.FlagTerminal, Gamma: 0.9}
	dst := samplertest.NewBatch(t, buf, 10)
	// The last step first, then the others in batches of 3 (so from
	// other stripes).
	ep.Insert(t, buf, 9, 10)
	for from := 0; from < 9; from += 3 {
		if err := r.Sample(rng, dst); !errors.Is(err, buffer.ErrEmpty) {
			t.Fatalf("after steps up to %d: Sample error %v, want ErrEmpty", from, err)
		}
		ep.Insert(t, buf, from, from+3)
	}
	if err := r.Sample(rng, dst); err != nil {
		t.Fatal(err)
	}
	steps := map[int32]bool{}
	for i := range 10 {
		if dst.EpisodeID[i] != 7 || steps[dst.EpisodeStep[i]] {
			t.Fatalf("row %d: episode %d step %d (seen %v)", i, dst.EpisodeID[i], dst.EpisodeStep[i], steps)
		}
		steps[dst.EpisodeStep[i]] = true
		if dst.Prob[i] != 0.1 {
			t.Fatalf("Prob %v", dst.Prob[i])
		}
	}
	if st := r.Stats(); st.Steps != 10 || st.Episodes != 1 || st.Open != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := r.Sample(rng, samplertest.NewBatch(t, buf, 11)); !errors.Is(err, buffer.ErrBatchSize) {
		t.Fatalf("11 rows of 10 steps: %v", err)
	}
	checkStored(t, r, buf)
}

// TestREFERAssemblesAcrossStripes: several actors' episodes, handed over
// in batches that the buffer spreads over 8 stripes, some in reverse
// order, with the stage polling at random moments: every episode is
// assembled in step order.
func TestREFERAssemblesAcrossStripes(t *testing.T) {
	const actors = 5
	buf := newREFERBuffer(t, 1<<13, 8)
	r := newREFER(t, buf, sampler.REFERConfig{MaxSteps: 1 << 13})
	rng := rand.New(rand.NewPCG(2, 2))
	type pending struct {
		ep   samplertest.Episode
		next int
		rev  bool
	}
	var act [actors]*pending
	total, steps := 0, 0
	var finished []uint64
	for total < 150 {
		a := rng.IntN(actors)
		if act[a] == nil {
			act[a] = &pending{ep: samplertest.RandEpisode(rng, uint64(a*1000+total), 40, 0.95), rev: rng.IntN(4) == 0}
			total++
		}
		p := act[a]
		if p.rev { // the whole episode in batches, last batch first
			for to := p.ep.Len(); to > 0; to -= 4 {
				p.ep.Insert(t, buf, max(0, to-4), to)
			}
			p.next = p.ep.Len()
		} else {
			k := min(p.ep.Len()-p.next, 1+rng.IntN(6))
			p.ep.Insert(t, buf, p.next, p.next+k)
			p.next += k
		}
		if p.next == p.ep.Len() {
			steps += p.ep.Len()
			finished = append(finished, p.ep.ID)
			act[a] = nil
		}
		if rng.IntN(5) == 0 {
			poll(t, r, buf)
			checkStored(t, r, buf)
		}
	}
	poll(t, r, buf)
	checkStored(t, r, buf)
	st := r.Stats()
	if st.Steps != steps || st.Episodes != len(finished) || st.Overwritten+st.Evicted+st.Malformed+st.Abandoned != 0 {
		t.Fatalf("stats %+v, want %d steps in %d episodes", st, steps, len(finished))
	}
	var got []uint64
	for _, ep := range sampler.REFEREpisodes(r) {
		got = append(got, ep.ID)
	}
	slices.Sort(got)
	slices.Sort(finished)
	if !slices.Equal(got, finished) {
		t.Fatalf("stored episodes %v, finished %v", got, finished)
	}
}

// TestREFERFIFOEviction: once the stage has filled, the stored steps stay
// within one episode of MaxSteps (MaxSteps ≤ N < MaxSteps + the oldest
// episode's length, refer.md §6) and the stored episodes are the newest
// ones.
func TestREFERFIFOEviction(t *testing.T) {
	const maxSteps = 1000
	buf := newREFERBuffer(t, 4096, 4)
	r := newREFER(t, buf, sampler.REFERConfig{MaxSteps: maxSteps})
	rng := rand.New(rand.NewPCG(3, 3))
	var order []uint64
	full := false
	for i := range 400 {
		ep := samplertest.RandEpisode(rng, uint64(i), 60, 0.99)
		for from := 0; from < ep.Len(); from += 7 {
			ep.Insert(t, buf, from, min(from+7, ep.Len()))
		}
		order = append(order, ep.ID)
		poll(t, r, buf)
		stored := sampler.REFEREpisodes(r)
		n := r.Stats().Steps
		full = full || n >= maxSteps
		if full && (n < maxSteps || n >= maxSteps+len(stored[0].Steps)) {
			t.Fatalf("episode %d: N = %d, want in [%d, %d + %d)", i, n, maxSteps, maxSteps, len(stored[0].Steps))
		}
		for k, ep := range stored {
			if want := order[len(order)-len(stored)+k]; ep.ID != want {
				t.Fatalf("episode %d: stored[%d] is %d, want %d (FIFO)", i, k, ep.ID, want)
			}
		}
	}
	checkStored(t, r, buf)
	if st := r.Stats(); !full || st.Evicted == 0 || st.Overwritten != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestREFEROverwriteDropsEpisode: with no room beyond MaxSteps the buffer
// overwrites stored steps; the episodes that lose one are dropped whole.
func TestREFEROverwriteDropsEpisode(t *testing.T) {
	buf := newREFERBuffer(t, 256, 2)
	r := newREFER(t, buf, sampler.REFERConfig{MaxSteps: 256})
	rng := rand.New(rand.NewPCG(4, 4))
	for i := range 200 {
		ep := samplertest.RandEpisode(rng, uint64(i), 30, 0.99)
		for from := 0; from < ep.Len(); from += 5 {
			ep.Insert(t, buf, from, min(from+5, ep.Len()))
		}
		if rng.IntN(3) == 0 {
			poll(t, r, buf)
			checkStored(t, r, buf)
		}
	}
	poll(t, r, buf)
	checkStored(t, r, buf)
	if st := r.Stats(); st.Overwritten == 0 || st.Steps > 256 {
		t.Fatalf("stats %+v", st)
	}
}

// TestREFERAbandonsOpenEpisodes: an episode whose end never arrives is
// forgotten after a capacity's worth of inserts.
func TestREFERAbandonsOpenEpisodes(t *testing.T) {
	buf := newREFERBuffer(t, 128, 2)
	r := newREFER(t, buf, sampler.REFERConfig{})
	unfinished := samplertest.Episode{ID: 99, Reward: make([]float32, 10), End: buffer.FlagTerminal, Gamma: 0.9}
	unfinished.Insert(t, buf, 0, 5)
	poll(t, r, buf)
	if ids := sampler.REFEROpenIDs(r); !slices.Equal(ids, []uint64{99}) {
		t.Fatalf("open %v", ids)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	for i := range 60 {
		samplertest.RandEpisode(rng, uint64(i), 10, 0.9).Insert(t, buf, 0, 1+rng.IntN(1))
		ep := samplertest.RandEpisode(rng, uint64(1000+i), 10, 0.9)
		ep.Insert(t, buf, 0, ep.Len())
		poll(t, r, buf)
	}
	if ids := sampler.REFEROpenIDs(r); slices.Contains(ids, 99) || r.Stats().Abandoned == 0 {
		t.Fatalf("open %v, stats %+v", ids, r.Stats())
	}
	checkStored(t, r, buf)
}

// TestREFERSampleUniformDistinct: every batch holds distinct steps, and
// over many batches every stored step is drawn equally often.
func TestREFERSampleUniformDistinct(t *testing.T) {
	buf := newREFERBuffer(t, 256, 4)
	r := newREFER(t, buf, sampler.REFERConfig{MaxSteps: 256})
	rng := rand.New(rand.NewPCG(6, 6))
	n := 0
	for i := 0; n < 60; i++ {
		ep := samplertest.RandEpisode(rng, uint64(i), 15, 0.9)
		ep.Insert(t, buf, 0, ep.Len())
		n += ep.Len()
	}
	poll(t, r, buf)
	index := map[uint32]int{}
	for _, ep := range sampler.REFEREpisodes(r) {
		for _, s := range ep.Steps {
			index[s.Slot] = len(index)
		}
	}
	counts := make([]int, len(index))
	dst := samplertest.NewBatch(t, buf, 8)
	for range 6000 {
		if err := r.Sample(rng, dst); err != nil {
			t.Fatal(err)
		}
		seen := map[uint32]bool{}
		for i, ref := range dst.Refs {
			if seen[ref.Slot] {
				t.Fatalf("slot %d twice in a batch", ref.Slot)
			}
			seen[ref.Slot] = true
			counts[index[ref.Slot]]++
			if dst.EpisodeStep[i] != int32(dst.Obs[2*i+1]) {
				t.Fatal("row data")
			}
		}
	}
	probs := make([]float64, len(counts))
	for i := range probs {
		probs[i] = 1 / float64(len(probs))
	}
	samplertest.ChiSquare(t, 6, counts, probs)
}

// TestREFERConcurrentInserts: four actors insert episodes while the
// learner goroutine samples; the index stays consistent, every sampled
// row is the step the stage filed, and the observer's view of the stored
// episodes is the stage's.
func TestREFERConcurrentInserts(t *testing.T) {
	buf := newREFERBuffer(t, 1024, 4)
	r := newREFER(t, buf, sampler.REFERConfig{MaxSteps: 700})
	var wg sync.WaitGroup
	for a := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(a), 7))
			for i := range 120 {
				ep := samplertest.RandEpisode(rng, uint64(a*1000+i), 20, 0.9)
				for from := 0; from < ep.Len(); from += 4 {
					if err := buf.Insert(ep.Rows(from, min(from+4, ep.Len()))); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	obs := newEpisodeLog()
	r.Observe(obs)
	rng := rand.New(rand.NewPCG(8, 8))
	dst := samplertest.NewBatch(t, buf, 16)
	for range 300 {
		if err := r.Sample(rng, dst); err != nil {
			if errors.Is(err, buffer.ErrEmpty) || errors.Is(err, buffer.ErrBatchSize) {
				continue
			}
			t.Fatal(err)
		}
		for i := range 16 {
			if int32(dst.Obs[2*i+1]) != dst.EpisodeStep[i] || uint64(dst.Obs[2*i]) != dst.EpisodeID[i] {
				t.Fatalf("row %d: torn item", i)
			}
		}
		obs.checkRows(t, dst)
	}
	wg.Wait()
	poll(t, r, buf)
	checkStored(t, r, buf)
	obs.check(t, r)
	if st := r.Stats(); st.Steps < 700 || st.Ingested+st.Lapped != buf.Stats().Inserts {
		t.Fatalf("stats %+v, buffer inserts %d", st, buf.Stats().Inserts)
	}
}

// TestREFERObserverEvents: the EpisodeSource contract. Observe reports
// the episodes already stored, oldest first; from then on the observer
// hears of every episode that finishes, is evicted or is overwritten, of
// every Sample's indexing and of its rows, so that its view of the stored
// episodes is always the stage's. Observe(nil) stops the events.
func TestREFERObserverEvents(t *testing.T) {
	buf := newREFERBuffer(t, 400, 4)
	r := newREFER(t, buf, sampler.REFERConfig{MaxSteps: 250})
	rng := rand.New(rand.NewPCG(21, 21))
	id := uint64(0)
	insert := func(n int) {
		for range n {
			ep := samplertest.RandEpisode(rng, id, 30, 0.9)
			id++
			for from := 0; from < ep.Len(); from += 6 {
				ep.Insert(t, buf, from, min(from+6, ep.Len()))
			}
		}
	}
	insert(6)
	poll(t, r, buf)
	log := newEpisodeLog()
	r.Observe(log)
	log.check(t, r) // the stored episodes, replayed
	if len(log.order) == 0 || log.indexed != 0 {
		t.Fatalf("Observe replayed %d episodes, %d Indexed", len(log.order), log.indexed)
	}
	dst := samplertest.NewBatch(t, buf, 8)
	for i := range 60 {
		insert(1 + rng.IntN(3))
		if err := r.Sample(rng, dst); err != nil {
			t.Fatal(err)
		}
		if log.indexed != i+1 {
			t.Fatalf("Sample %d: %d Indexed events", i+1, log.indexed)
		}
		log.checkRows(t, dst)
		log.check(t, r)
	}
	if st := r.Stats(); st.Evicted == 0 || st.Overwritten+st.Evicted < 10 {
		t.Fatalf("stats %+v: the test does not exercise eviction", st)
	}
	r.Observe(nil)
	n := len(log.order)
	insert(5)
	poll(t, r, buf)
	if len(log.order) != n || log.indexed != 60 {
		t.Fatalf("events after Observe(nil): %d episodes (was %d), %d Indexed", len(log.order), n, log.indexed)
	}
}
