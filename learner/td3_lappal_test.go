package learner

import (
	"math"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// lapPALCase is one stored transition of TestTD3LAPPALByHand and what the
// authors' TD3 code (sfujim/LAP-PAL, continuous/{TD3,LAP_TD3,PAL_TD3}.py)
// computes for it, worked out by hand with constant critics Q_1 = −1,
// Q_2 = −1.5 (so the clipped double-Q target is y = r + D·(−1.5)) and
// alpha 0.4, k = min_priority = 1.
type lapPALCase struct {
	r, d   float32 // reward and stored discount
	d1, d2 float64 // δ_k = Q_k − y
	prio   float64 // LAP's write-back: max(|δ1|, |δ2|).clamp(min=1).pow(0.4)
	// lap and pal are dL/dQ_k of one row times the batch size: LAP's
	// Huber(1) of each critic (clip(δ, −1, 1)) and PAL's loss of each
	// critic before the division by λ̂ (δ below 1, sign(δ)·|δ|^0.4 above).
	lap, pal [2]float64
	// huber and palv are the per-critic values: the paper's Eq. 2
	// (|δ| − 0.5 beyond 1; the authors' code drops the constant −0.5) and
	// PAL's Eq. 10 (|δ|^1.4/1.4 beyond 1).
	huber, palv [2]float64
}

// lapPALCases: δ in both of Huber's regimes, the larger |δ| from either
// critic, and one row at the priority floor. Every number is exact in
// binary except the powers, given to 16 digits.
var lapPALCases = []lapPALCase{
	// y = −0.5 − 0.75 = −1.25: δ = 0.25, −0.25; both quadratic, floor 1.
	{r: -0.5, d: 0.5, d1: 0.25, d2: -0.25, prio: 1,
		lap: [2]float64{0.25, -0.25}, pal: [2]float64{0.25, -0.25},
		huber: [2]float64{0.03125, 0.03125}, palv: [2]float64{0.03125, 0.03125}},
	// y = 0.5 − 0.75 = −0.25: δ = −0.75 (quadratic), −1.25 (linear, the max).
	{r: 0.5, d: 0.5, d1: -0.75, d2: -1.25, prio: 1.0933620739432781,
		lap: [2]float64{-0.75, -1}, pal: [2]float64{-0.75, -1.0933620739432781},
		huber: [2]float64{0.28125, 0.75}, palv: [2]float64{0.28125, 0.9762161374493555}},
	// A termination: y = −6, δ = 5 (the max), 4.5.
	{r: -6, d: 0, d1: 5, d2: 4.5, prio: 1.9036539387158786,
		lap: [2]float64{1, 1}, pal: [2]float64{1.9036539387158786, 1.8250930256796174},
		huber: [2]float64{4.5, 4}, palv: [2]float64{6.7987640668424225, 5.866370439684483}},
	// y = 3 − 0.75 = 2.25: δ = −3.25, −3.75 (the max).
	{r: 3, d: 0.5, d1: -3.25, d2: -3.75, prio: 1.6967290951357943,
		lap: [2]float64{-1, -1}, pal: [2]float64{-1.6023350931656946, -1.6967290951357943},
		huber: [2]float64{2.75, 3.25}, palv: [2]float64{3.719706466277505, 4.544810076256591}},
}

// TestTD3LAPPALByHand pins TD3's critic step under lap and pal (and
// uniform, TD3's MSE) to the authors' formulas on hand-computed numbers,
// independently of model.Loss: each critic's dL/dQ per row, the loss,
// LAP's priority write-back max(|δ1|, |δ2|, 1)^0.4, and PAL's division of
// both critics' losses by λ̂, the batch mean of max(|δ1|, |δ2|, 1)^0.4. A
// scale slip (an MSE-sized gradient for Huber, a missing clamp, the
// priority of one critic only, λ̂ per critic or undivided) fails it.
func TestTD3LAPPALByHand(t *testing.T) {
	const nS, nA, batch = 3, 2, 64
	for _, name := range []string{"lap", "pal", "uniform"} {
		t.Run(name, func(t *testing.T) {
			buf := contBuffer(t, batch, nS, nA, 0)
			// batch/4 copies of each case fill the buffer (the critics
			// ignore the input: their weights are zero).
			tr := buffer.Transitions{Obs: make([]float32, batch*nS), NextObs: make([]float32, batch*nS), ActionVec: make([]float32, batch*nA)}
			for i := range batch {
				c := lapPALCases[i%len(lapPALCases)]
				tr.Obs[i*nS] = float32(i)
				tr.Reward = append(tr.Reward, c.r)
				tr.Discount = append(tr.Discount, c.d)
			}
			if err := buf.Insert(&tr); err != nil {
				t.Fatal(err)
			}
			actor, _ := td3Nets(t, nS, nA, []int{4}, model.ReLU, 3)
			constant := func(q float64) []float64 { p := make([]float64, nS+nA+1); p[nS+nA] = q; return p }
			critic := linearNet(t, nS+nA, 1, constant(-1))
			m := td3Method(t, name, buf, &sampler.LAPConfig{Alpha: 0.4, K: 1})
			l, err := NewTD3(TD3Config{Batch: batch, MaxAction: 1, Seed: 9}, actor, critic, buf, m, nil)
			if err != nil {
				t.Fatal(err)
			}
			setParams(t, l.critic[1], constant(-1.5))
			setParams(t, l.criticTarg[0], constant(-1))
			setParams(t, l.criticTarg[1], constant(-1.5))
			td3Steps(t, l, 1)

			b := l.batch
			rows := make([]lapPALCase, batch)
			seen := map[int]bool{}
			var lam, sumTD float64
			for i := range batch {
				for j, c := range lapPALCases {
					if b.Reward[i] == c.r {
						rows[i] = c
						seen[j] = true
					}
				}
				lam += rows[i].prio / batch
				sumTD += max(math.Abs(rows[i].d1), math.Abs(rows[i].d2))
			}
			if len(seen) != len(lapPALCases) {
				t.Fatalf("the batch of %d drew %d of the %d items", batch, len(seen), len(lapPALCases))
			}
			var wantLoss float64
			for i, c := range rows {
				if got := l.y[i]; got != float64(c.r)+float64(c.d)*-1.5 {
					t.Fatalf("row %d: target %v, want r + D·min(Q'1, Q'2) = %v", i, got, float64(c.r)+float64(c.d)*-1.5)
				}
				for k, dk := range [2]float64{c.d1, c.d2} {
					var g, v float64
					switch name {
					case "lap": // Huber(1) mean over the batch, no weights
						g, v = c.lap[k]/batch, c.huber[k]/batch
					case "pal": // PAL mean over the batch, divided by λ̂
						g, v = c.pal[k]/lam/batch, c.palv[k]/lam/batch
					default: // F.mse_loss: mean of δ²
						g, v = 2*dk/batch, dk*dk/batch
					}
					wantLoss += v
					if got := l.grad[k][i]; math.Abs(got-g) > 1e-15*math.Abs(g) {
						t.Errorf("row %d (δ%d = %v): dL/dQ%d = %.17g, want %.17g", i, k+1, dk, k+1, got, g)
					}
				}
				_, got, ok := buf.SlotPriority(int(b.Refs[i].Slot))
				want := 1.0 // uniform selection keeps the initial priority
				if name == "lap" {
					want = c.prio
				}
				if !ok || math.Abs(got-want) > buf.Resolution() {
					t.Errorf("row %d: stored priority %v, want %v", i, got, want)
				}
			}
			st := l.Stats()
			if math.Abs(st.CriticLoss-wantLoss) > 1e-13*wantLoss {
				t.Errorf("critic loss %.17g, want %.17g", st.CriticLoss, wantLoss)
			}
			if want := sumTD / batch; math.Abs(st.MeanAbsTD-want) > 1e-15*want {
				t.Errorf("mean |δ| %v, want the rows' mean of max(|δ1|, |δ2|) %v", st.MeanAbsTD, want)
			}
			if name == "lap" && math.Abs(buf.MaxPriority()-lapPALCases[2].prio) > buf.Resolution() {
				t.Errorf("max priority %v, want the largest written, 5^0.4 = %v (new items get it)", buf.MaxPriority(), lapPALCases[2].prio)
			}
		})
	}
}
