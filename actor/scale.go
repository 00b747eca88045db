package actor

import (
	"fmt"
	"math"

	"github.com/apexrl/apex/envs"
)

// ScaleAction maps policy outputs u in [−1, 1]^A affinely onto box (A =
// box.Dim()):
//
//	a_j = mid_j + half_j·u_j,  mid_j = low_j/2 + high_j/2,  half_j = high_j/2 − low_j/2
//
// so −1 ↦ low, 0 ↦ the centre and 1 ↦ high. On a symmetric box [−M, M]
// (Pendulum, MountainCarContinuous, MuJoCo) mid is 0 and half is M, so
// a = M·u exactly: TD3's max_action·π(s) (Fujimoto et al. 2018, arXiv
// 1802.09477). The continuous actor uses this mapping for the action it
// plays and stores; a learner uses it to turn its policy's output into
// the same units as the buffer's ActionVec (and UnscaleAction for the
// way back), so that actor and learner agree.
//
// src holds B = len(src)/A actions, row-major: one action, or a learner's
// whole batch. dst receives as many and may be src itself. Values are not
// clipped: u outside [−1, 1] lands outside the box. Computed in float64
// whatever F is.
//
// It panics if the box is empty or has an infinite bound, or if the
// lengths do not fit (len(dst) != len(src), or len(src) not a multiple of
// A). Cost: O(len(src)) with no allocation; safe for concurrent use (box
// is only read).
func ScaleAction[F float32 | float64](box envs.Box, dst, src []F) {
	A := checkScale("ScaleAction", box, len(dst), len(src))
	for i, u := range src {
		lo, hi := box.Low[i%A], box.High[i%A]
		dst[i] = F(lo/2 + hi/2 + (hi/2-lo/2)*float64(u))
	}
}

// UnscaleAction is ScaleAction's inverse: u_j = (a_j − mid_j)/half_j maps
// box onto [−1, 1]^A (u_j = 0 in a dimension where low_j = high_j). On a
// symmetric box [−M, M] it is a/M. A learner that feeds its critic
// normalised actions, or compares its policy's output with stored actions,
// applies it to the buffer's ActionVec rows. Same contract as ScaleAction.
func UnscaleAction[F float32 | float64](box envs.Box, dst, src []F) {
	A := checkScale("UnscaleAction", box, len(dst), len(src))
	for i, a := range src {
		lo, hi := box.Low[i%A], box.High[i%A]
		half := hi/2 - lo/2
		if half == 0 {
			dst[i] = 0
			continue
		}
		dst[i] = F((float64(a) - (lo/2 + hi/2)) / half)
	}
}

// checkScale panics unless box is a non-empty box with finite bounds and
// the lengths fit; it returns the box's dimension.
func checkScale(op string, box envs.Box, ndst, nsrc int) int {
	A := box.Dim()
	if A == 0 || len(box.High) != A {
		panic(fmt.Sprintf("actor: %s: the box %v has no dimension or unequal bounds", op, box))
	}
	for j := range A {
		if math.IsInf(box.Low[j], 0) || math.IsInf(box.High[j], 0) || math.IsNaN(box.Low[j]) || math.IsNaN(box.High[j]) {
			panic(fmt.Sprintf("actor: %s: the box %v is unbounded", op, box))
		}
	}
	if ndst != nsrc || nsrc%A != 0 {
		panic(fmt.Sprintf("actor: %s: %d values into %d, for actions of %d", op, nsrc, ndst, A))
	}
	return A
}

// intoBox clips each a[j] to [low_j, high_j] and rounds it to a float32
// value inside the box (round32In), in place; a32, when not nil, receives
// the float32 values. NaN stays NaN. O(A).
func intoBox(box envs.Box, a []float64, a32 []float32) {
	for j, v := range a {
		lo, hi := box.Low[j], box.High[j]
		f := round32In(min(max(v, lo), hi), lo, hi)
		a[j] = float64(f)
		if a32 != nil {
			a32[j] = f
		}
	}
}

// round32In returns the float32 value nearest to v that lies in [lo, hi]
// (v itself rounded, or its neighbour towards the box when rounding left
// it), so that the action stored as float32 and the one sent to the
// environment are the same value, inside the box. NaN stays NaN.
func round32In(v, lo, hi float64) float32 {
	f := float32(v)
	if float64(f) > hi {
		f = math.Nextafter32(f, float32(math.Inf(-1)))
	}
	if float64(f) < lo {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}
