package model

import "fmt"

// DuelingCombine writes the dueling Q head (Wang et al. 2016,
// arXiv:1511.06581, eq. 9) for a batch of B = len(v) rows with
// A = len(adv)/B actions:
//
//	q[i,a] = v[i] + adv[i,a] - (1/A)·Σ_a' adv[i,a']
//
// q and adv are B×A row-major. Cost O(B·A), no allocation. It panics on
// mismatched lengths.
func DuelingCombine(q, v, adv []float64) {
	nA := duelingActions(len(q), len(v), len(adv))
	inv := 1 / float64(nA)
	for i, vi := range v {
		row := adv[i*nA : (i+1)*nA]
		var s float64
		for _, x := range row {
			s += x
		}
		base := vi - s*inv
		out := q[i*nA : (i+1)*nA]
		for a, x := range row {
			out[a] = base + x
		}
	}
}

// DuelingBackward is the backward pass of DuelingCombine: given
// dq = dL/dq (B×A) it writes
//
//	dv[i]     = Σ_a dq[i,a]
//	dadv[i,a] = dq[i,a] - (1/A)·Σ_a' dq[i,a']
//
// Cost O(B·A), no allocation. It panics on mismatched lengths.
func DuelingBackward(dv, dadv, dq []float64) {
	nA := duelingActions(len(dq), len(dv), len(dadv))
	inv := 1 / float64(nA)
	for i := range dv {
		row := dq[i*nA : (i+1)*nA]
		var s float64
		for _, x := range row {
			s += x
		}
		dv[i] = s
		m := s * inv
		out := dadv[i*nA : (i+1)*nA]
		for a, x := range row {
			out[a] = x - m
		}
	}
}

func duelingActions(nq, nv, nadv int) int {
	if nv == 0 || nadv%nv != 0 || nq != nadv || nadv == 0 {
		panic(fmt.Sprintf("model: dueling head: len(q) = %d, len(v) = %d, len(adv) = %d (want B×A, B, B×A)", nq, nv, nadv))
	}
	return nadv / nv
}
