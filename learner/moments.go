package learner

import (
	"math"
	"sync/atomic"
)

// Moments are running sums over every row a learner has sampled: of |δ|,
// the absolute TD error, and of Q(s, a), both before the step's update.
// They give the statistics of the sampled batches NERS's Table 3 compares
// across samplers (Oh et al. 2021).
type Moments struct {
	// N is the number of rows summed.
	N uint64 `json:"n"`
	// SumTD and SumTD2 are Σ|δ| and Σδ²; SumQ and SumQ2 Σ Q and Σ Q².
	SumTD  float64 `json:"sum_td"`
	SumTD2 float64 `json:"sum_td2"`
	SumQ   float64 `json:"sum_q"`
	SumQ2  float64 `json:"sum_q2"`
}

// TD returns the mean and standard deviation of |δ| over the rows (0, 0
// for none). O(1).
func (m Moments) TD() (mean, sd float64) { return meanSD(m.N, m.SumTD, m.SumTD2) }

// Q returns the mean and standard deviation of Q(s, a) over the rows (0,
// 0 for none). O(1).
func (m Moments) Q() (mean, sd float64) { return meanSD(m.N, m.SumQ, m.SumQ2) }

func meanSD(n uint64, s, s2 float64) (mean, sd float64) {
	if n == 0 {
		return 0, 0
	}
	k := float64(n)
	mean = s / k
	return mean, math.Sqrt(max(0, s2/k-mean*mean))
}

// momentTracker accumulates Moments; written by the stepping goroutine
// only, read from any (each sum an atomic word, so the hot path takes no
// lock; a reader may see one step's sums half applied, as the learners'
// other Stats fields).
type momentTracker struct {
	n              atomic.Uint64
	td, td2, q, q2 atomic.Uint64 // float64 bits
}

// add sums one batch: absTD[i] and q[i] per row. O(len(q)), no lock.
func (t *momentTracker) add(absTD, q []float64) {
	var d Moments
	for i, x := range q {
		d.SumTD += absTD[i]
		d.SumTD2 += absTD[i] * absTD[i]
		d.SumQ += x
		d.SumQ2 += x * x
	}
	plus := func(a *atomic.Uint64, v float64) { a.Store(math.Float64bits(math.Float64frombits(a.Load()) + v)) }
	plus(&t.td, d.SumTD)
	plus(&t.td2, d.SumTD2)
	plus(&t.q, d.SumQ)
	plus(&t.q2, d.SumQ2)
	t.n.Add(uint64(len(q)))
}

// load returns the sums.
func (t *momentTracker) load() Moments {
	f := func(a *atomic.Uint64) float64 { return math.Float64frombits(a.Load()) }
	return Moments{N: t.n.Load(), SumTD: f(&t.td), SumTD2: f(&t.td2), SumQ: f(&t.q), SumQ2: f(&t.q2)}
}

// store sets the sums (a restored checkpoint's; the learner is quiescent).
func (t *momentTracker) store(m Moments) {
	t.n.Store(m.N)
	t.td.Store(math.Float64bits(m.SumTD))
	t.td2.Store(math.Float64bits(m.SumTD2))
	t.q.Store(math.Float64bits(m.SumQ))
	t.q2.Store(math.Float64bits(m.SumQ2))
}
