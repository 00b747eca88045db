package learner

import (
	"math"
	"sync"
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

// momentTracker accumulates Moments; written by the stepping goroutine,
// read from any.
type momentTracker struct {
	mu sync.Mutex
	m  Moments
}

// add sums one batch: absTD[i] and q[i] per row. O(len(q)) and one lock.
func (t *momentTracker) add(absTD, q []float64) {
	var d Moments
	for i, x := range q {
		d.SumTD += absTD[i]
		d.SumTD2 += absTD[i] * absTD[i]
		d.SumQ += x
		d.SumQ2 += x * x
	}
	t.mu.Lock()
	t.m.N += uint64(len(q))
	t.m.SumTD += d.SumTD
	t.m.SumTD2 += d.SumTD2
	t.m.SumQ += d.SumQ
	t.m.SumQ2 += d.SumQ2
	t.mu.Unlock()
}

// load returns the sums.
func (t *momentTracker) load() Moments {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m
}

// store sets the sums (a restored checkpoint's).
func (t *momentTracker) store(m Moments) {
	t.mu.Lock()
	t.m = m
	t.mu.Unlock()
}
