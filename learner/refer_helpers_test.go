package learner

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// referPair is a REFER stage and the controller observing it, for the
// controller's own tests (the learners build theirs from a Method).
type referPair struct {
	*REFERController
	stage *sampler.REFER
}

// newReferPair builds a stage over buf and its controller, or fails the
// test.
func newReferPair(t testing.TB, buf *buffer.Buffer, cfg sampler.REFERConfig) *referPair {
	t.Helper()
	r, err := sampler.NewREFER(buf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewREFERController(r)
	if err != nil {
		t.Fatal(err)
	}
	return &referPair{REFERController: c, stage: r}
}

// poll makes the stage index what was written (a Sample of one row;
// ErrEmpty is fine).
func (r *referPair) poll(t testing.TB, buf *buffer.Buffer) {
	t.Helper()
	if err := r.stage.Sample(rand.New(rand.NewPCG(0, 0)), samplertest.NewBatch(t, buf, 1)); err != nil && r.stage.Stats().Steps > 0 {
		t.Fatal(err)
	}
}

// storedRhos returns the stored rho of every stored step.
func (c *REFERController) storedRhos() []float64 {
	out := make([]float64, 0, c.live.Len())
	for _, s := range c.live.Slots() {
		out = append(out, c.rho[s])
	}
	return out
}

// referStepView is the controller's state of one stored step.
type referStepView struct {
	Slot             uint32
	Reward, Discount float64 // as stored (unscaled reward)
	Rho, V, Qret, KL float64
	Refreshed        bool
}

// referEpisodeView is one stored episode, steps in order; ID is its
// serial (finishing order).
type referEpisodeView struct {
	ID        uint64
	Truncated bool
	VBoot     float64
	Steps     []referStepView
}

// episodes returns the stored episodes, oldest first.
func (c *REFERController) episodes() []referEpisodeView {
	var out []referEpisodeView
	for h := range c.eps {
		e := &c.eps[h]
		if e.serial == 0 {
			continue
		}
		ep := referEpisodeView{ID: e.serial, Truncated: e.truncated, VBoot: e.vboot}
		for _, s := range e.slots {
			ep.Steps = append(ep.Steps, referStepView{Slot: s, Reward: c.rew[s], Discount: c.disc[s],
				Rho: c.rho[s], V: c.v[s], Qret: c.qret[s], KL: c.kl[s], Refreshed: c.klSet[s]})
		}
		out = append(out, ep)
	}
	for i := 1; i < len(out); i++ { // insertion sort by serial
		for j := i; j > 0 && out[j].ID < out[j-1].ID; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// sweepAll recomputes every stored episode's Qret from its end.
func (c *REFERController) sweepAll() {
	for h := range c.eps {
		if e := &c.eps[h]; e.serial != 0 {
			c.sweep(int32(h), len(e.slots)-1)
		}
	}
}

// directQret is the Retrace target of step t of an episode written as a
// sum (Eq. 8 expanded, refer.md §2): with c_k = min(1, rho_k),
//
//	Qret_t = Σ_{k=t}^{T−1} W_{t,k} (r̂_k + d_k X_k),  W_{t,t} = 1, W_{t,k+1} = W_{t,k} d_k c_{k+1},
//	X_k = (1 − c_{k+1}) V_{k+1} for k < T−1,  X_{T−1} = V(s_T) (truncated) or 0,
//
// computed in O(T) per step, independently of the controller's backward
// sweep.
func directQret(ep referEpisodeView, scale float64, t int) float64 {
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
// the stored values, and the controller's invariants hold.
func checkQret(t testing.TB, r *referPair, tol float64) {
	t.Helper()
	if err := r.check(); err != nil {
		t.Fatal(err)
	}
	for _, ep := range r.episodes() {
		for i, s := range ep.Steps {
			if want := directQret(ep, r.rscale, i); math.Abs(s.Qret-want) > tol*max(1, math.Abs(want)) {
				t.Fatalf("episode %d step %d of %d: Qret %v, direct recursion %v", ep.ID, i, len(ep.Steps), s.Qret, want)
			}
		}
	}
}
