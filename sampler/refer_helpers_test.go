package sampler_test

import (
	"github.com/apexrl/apex/sampler/samplertest"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// newREFERBuffer returns an empty buffer a REFER stage accepts: 2-wide
// observations, 1-wide continuous actions, the episode columns and the
// REFER float columns.
func newREFERBuffer(t testing.TB, capacity, stripes int) *buffer.Buffer {
	t.Helper()
	b, err := buffer.New(buffer.Config{Capacity: capacity, Stripes: stripes, ObsDim: 2, Action: buffer.Continuous,
		ActionDim: 1, Episode: true, Floats: sampler.REFERColumns(1)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newREFER builds a stage or fails the test.
func newREFER(t testing.TB, buf *buffer.Buffer, cfg sampler.REFERConfig) *sampler.REFER {
	t.Helper()
	r, err := sampler.NewREFER(buf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// referEp describes a test episode.
type referEp struct {
	id     uint64
	reward []float32
	end    uint32 // buffer.FlagTerminal or buffer.FlagTruncated
	vboot  float32
	gamma  float32
}

func (e referEp) len() int { return len(e.reward) }

// randEpisode returns an episode of length in [1, maxLen] with rewards in
// [-2, 1), ending by termination or truncation (half each) with a
// bootstrap value in [-1, 1).
func randEpisode(rng *rand.Rand, id uint64, maxLen int, gamma float32) referEp {
	e := referEp{id: id, reward: make([]float32, 1+rng.IntN(maxLen)), gamma: gamma, end: buffer.FlagTerminal}
	for i := range e.reward {
		e.reward[i] = float32(3*rng.Float64() - 2)
	}
	if rng.IntN(2) == 0 {
		e.end, e.vboot = buffer.FlagTruncated, float32(2*rng.Float64()-1)
	}
	return e
}

// rows builds the transitions of steps [from, to) of e: Obs = (id, t),
// NextObs = (id, t+1), action 0.01·t, behaviour mean 0 and std 1,
// discount gamma (0 at a termination), the end flag and V(s_T) on the
// last step.
func (e referEp) rows(from, to int) *buffer.Transitions {
	n := to - from
	tr := &buffer.Transitions{
		Obs: make([]float32, 2*n), NextObs: make([]float32, 2*n), ActionVec: make([]float32, n),
		Reward: make([]float32, n), Discount: make([]float32, n), Flags: make([]uint32, n),
		EpisodeID: make([]uint64, n), EpisodeStep: make([]int32, n),
		Floats: [][]float32{make([]float32, n), make([]float32, n), make([]float32, n)},
	}
	for i := range n {
		t := from + i
		tr.Obs[2*i], tr.Obs[2*i+1] = float32(e.id), float32(t)
		tr.NextObs[2*i], tr.NextObs[2*i+1] = float32(e.id), float32(t+1)
		tr.ActionVec[i] = 0.01 * float32(t)
		tr.Reward[i] = e.reward[t]
		tr.Discount[i] = e.gamma
		tr.EpisodeID[i], tr.EpisodeStep[i] = e.id, int32(t)
		tr.Floats[1][i] = 1
		if t == e.len()-1 {
			tr.Flags[i] = e.end
			if e.end == buffer.FlagTerminal {
				tr.Discount[i] = 0
			} else {
				tr.Floats[2][i] = e.vboot
			}
		}
	}
	return tr
}

// insert inserts steps [from, to) of e.
func (e referEp) insert(t testing.TB, buf *buffer.Buffer, from, to int) {
	t.Helper()
	if err := buf.Insert(e.rows(from, to)); err != nil {
		t.Fatal(err)
	}
}

// poll makes the stage index what was written (a Sample of one row;
// ErrEmpty is fine).
func poll(t testing.TB, r *sampler.REFER, buf *buffer.Buffer) {
	t.Helper()
	if err := r.Sample(rand.New(rand.NewPCG(0, 0)), samplertest.NewBatch(t, buf, 1)); err != nil && r.Stats().Steps > 0 {
		t.Fatal(err)
	}
}

// checkStored fails unless every stored episode's steps are, in order,
// the buffer's items of that episode (by GatherSlot) and the stage's
// invariants hold.
func checkStored(t testing.TB, r *sampler.REFER, buf *buffer.Buffer) {
	t.Helper()
	if err := sampler.CheckREFER(r); err != nil {
		t.Fatal(err)
	}
	b := samplertest.NewBatch(t, buf, 1)
	for _, ep := range sampler.REFEREpisodes(r) {
		for i, s := range ep.Steps {
			if !buf.GatherSlot(b, 0, int(s.Slot)) || b.EpisodeID[0] != ep.ID || b.EpisodeStep[0] != int32(i) || b.Obs[1] != float32(i) {
				t.Fatalf("episode %d step %d (slot %d): buffer holds episode %d step %d", ep.ID, i, s.Slot, b.EpisodeID[0], b.EpisodeStep[0])
			}
		}
	}
}

// directQret is the Retrace target of step t of an episode written as a
// sum (Eq. 8 expanded, refer.md §2): with c_k = min(1, rho_k),
//
//	Qret_t = Σ_{k=t}^{T−1} W_{t,k} (r̂_k + d_k X_k),  W_{t,t} = 1, W_{t,k+1} = W_{t,k} d_k c_{k+1},
//	X_k = (1 − c_{k+1}) V_{k+1} for k < T−1,  X_{T−1} = V(s_T) (truncated) or 0,
//
// computed in O(T) per step, independently of the stage's backward sweep.
func directQret(ep sampler.REFEREpisode, scale float64, t int) float64 {
	T := len(ep.Steps)
	var q float64
	w := 1.0
	for k := t; k < T; k++ {
		s := ep.Steps[k]
		x := 0.0
		if k < T-1 {
			n := ep.Steps[k+1]
			x = (1 - math.Min(1, n.Rho)) * n.V
		} else if ep.Truncated {
			x = ep.VBoot
		}
		q += w * (s.Reward*scale + s.Discount*x)
		if k < T-1 {
			w *= s.Discount * math.Min(1, ep.Steps[k+1].Rho)
		}
	}
	return q
}

// checkQret fails unless every stored step's Qret equals directQret of
// the stored values.
func checkQret(t testing.TB, r *sampler.REFER, tol float64) {
	t.Helper()
	scale := sampler.REFERRewardScale(r)
	for _, ep := range sampler.REFEREpisodes(r) {
		for i, s := range ep.Steps {
			if want := directQret(ep, scale, i); math.Abs(s.Qret-want) > tol*max(1, math.Abs(want)) {
				t.Fatalf("episode %d step %d of %d: Qret %v, direct recursion %v", ep.ID, i, len(ep.Steps), s.Qret, want)
			}
		}
	}
}
