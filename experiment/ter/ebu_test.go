package ter

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apexrl/apex/buffer"
)

// handDataset is three episodes of a 5-chain: a straight success (episode
// 0), a time-out (1), and a success with a detour (2).
func handDataset() *Dataset {
	ds := &Dataset{N: 5, Limit: 3, Successes: 2, Truncations: 1}
	add := func(ep int, s, a []int) {
		for t := range a {
			last := t == len(a)-1
			ds.Steps = append(ds.Steps, Transition{S: s[t], A: a[t], S2: s[t+1], R: b2f(s[t+1] == 4), Terminated: s[t+1] == 4,
				Truncated: last && s[t+1] != 4, Episode: ep, T: t})
		}
	}
	add(0, []int{0, 1, 2, 3, 4}, []int{0, 0, 0, 0})
	add(1, []int{0, 0, 1, 0}, []int{1, 0, 1})
	add(2, []int{0, 1, 0, 1, 2, 3, 4}, []int{0, 1, 0, 0, 0, 0})
	return ds
}

// rowKey identifies a sampled row by its episode and step.
type rowKey struct{ ep, t int }

func keys(b *buffer.Batch) []rowKey {
	out := make([]rowKey, b.Len())
	for i := range out {
		out[i] = rowKey{int(b.EpisodeID[i]), int(b.EpisodeStep[i])}
	}
	return out
}

func backward(ep, n int) []rowKey {
	var out []rowKey
	for t := n - 1; t >= 0; t-- {
		out = append(out, rowKey{ep, t})
	}
	return out
}

// TestEBUOrder: the latest successful episode backwards from its terminal
// transition, then the earlier one, then the latest again; the time-out is
// never replayed. Rows of a larger batch continue across episodes.
func TestEBUOrder(t *testing.T) {
	ds := handDataset()
	buf, err := ds.Buffer(0.99)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEBU(buf)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(backward(2, 6), backward(0, 4), backward(2, 6), backward(0, 4))
	rng := rand.New(rand.NewPCG(1, 2))
	one := mustBatch(t, buf, 1)
	var got []rowKey
	for range 13 {
		if err := e.Sample(rng, one); err != nil {
			t.Fatal(err)
		}
		got = append(got, keys(one)...)
		s := ds.Steps[index(ds, got[len(got)-1])]
		if int(one.StateHash[0]) != s.S || int(one.Action[0]) != s.A || int(one.NextStateHash[0]) != s.S2 {
			t.Fatalf("row %v holds (%d, %d, %d), the dataset (%d, %d, %d)", got[len(got)-1], one.StateHash[0], one.Action[0], one.NextStateHash[0], s.S, s.A, s.S2)
		}
	}
	three := mustBatch(t, buf, 3)
	if err := e.Sample(rng, three); err != nil {
		t.Fatal(err)
	}
	got = append(got, keys(three)...)
	if !slices.Equal(got, want[:16]) {
		t.Errorf("replay order\n got %v\nwant %v", got, want[:16])
	}
	if st := e.Stats(); st.Episodes != 2 || st.Passes != 2 || st.Replayed != 16 || st.Uniform != 0 {
		t.Errorf("stats %+v", st)
	}
	if _, err := e.Update(three.Refs, []float64{1, 2, 3}); err != nil {
		t.Error(err)
	}
	if _, err := e.Update(three.Refs, []float64{1, -2, 3}); !errors.Is(err, buffer.ErrPriority) {
		t.Errorf("negative TD error: %v", err)
	}
}

func index(ds *Dataset, k rowKey) int {
	for i, s := range ds.Steps {
		if s.Episode == k.ep && s.T == k.t {
			return i
		}
	}
	return -1
}

// TestEBUFallback: with no successful episode, or once every stored
// episode has been overwritten, EBU draws uniformly.
func TestEBUFallback(t *testing.T) {
	ds := handDataset()
	ds.Steps = ds.Steps[4:7] // the time-out only
	buf, _ := ds.Buffer(0.99)
	e, _ := NewEBU(buf)
	b := mustBatch(t, buf, 2)
	if err := e.Sample(rand.New(rand.NewPCG(1, 2)), b); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Uniform != 2 || st.Replayed != 0 {
		t.Errorf("no success: %+v", st)
	}

	ds = handDataset()
	buf, _ = ds.Buffer(0.99)
	e, _ = NewEBU(buf)
	// Overwrite every slot with transitions of a new, unfinished episode.
	n := len(ds.Steps)
	tr := buffer.Transitions{Obs: make([]float32, n*5), NextObs: make([]float32, n*5), Action: make([]int32, n),
		Reward: make([]float32, n), Discount: make([]float32, n), EpisodeID: make([]uint64, n), EpisodeStep: make([]int32, n)}
	for i := range n {
		tr.EpisodeID[i], tr.EpisodeStep[i] = 9, int32(i)
	}
	if err := buf.Insert(&tr); err != nil {
		t.Fatal(err)
	}
	if err := e.Sample(rand.New(rand.NewPCG(1, 2)), b); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Episodes != 0 || st.Uniform != 2 || st.Skipped != 2 {
		t.Errorf("overwritten: %+v", st)
	}
}

// TestGreedyPER: every item starts at priority 1 and is replayed once
// before any is replayed twice (its priority drops to its |δ| < 1); the
// largest priority wins afterwards.
func TestGreedyPER(t *testing.T) {
	ds := handDataset()
	buf, _ := ds.Buffer(0.99)
	g, err := NewGreedyPER(buf)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	b := mustBatch(t, buf, 1)
	seen := map[buffer.Ref]bool{}
	for i := range len(ds.Steps) {
		if err := g.Sample(rng, b); err != nil {
			t.Fatal(err)
		}
		if seen[b.Refs[0]] {
			t.Fatalf("update %d replays %v again", i, b.Refs[0])
		}
		seen[b.Refs[0]] = true
		if _, err := g.Update(b.Refs, []float64{0.1 + 0.01*float64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	last := b.Refs[0] // the largest |δ| written
	if err := g.Sample(rng, b); err != nil || b.Refs[0] != last {
		t.Errorf("after a pass: %v (%v), want the largest priority %v", b.Refs[0], err, last)
	}
	two := mustBatch(t, buf, 2)
	if err := g.Sample(rng, two); err != nil || two.Refs[0] == two.Refs[1] {
		t.Errorf("a batch of 2 repeats an item: %v, %v", two.Refs, err)
	}
}

// mustBatch returns buf.NewBatch(n) and fails the test on error.
func mustBatch(t testing.TB, buf *buffer.Buffer, n int) *buffer.Batch {
	t.Helper()
	b, err := buf.NewBatch(n)
	if err != nil {
		t.Fatalf("NewBatch(%d): %v", n, err)
	}
	return b
}
