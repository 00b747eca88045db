package model

import "math"

// A squashed-Gaussian policy network (SAC, Haarnoja et al. 2018,
// arXiv:1812.05905, §4 and Appendix C) maps an observation to 2·A
// outputs: the means μ of A Gaussians, then their raw log standard
// deviations, which are clamped to [SquashedLogStdMin, SquashedLogStdMax]
// (SquashedLogStd). An action u ~ N(μ, diag σ²) is squashed by tanh into
// (−1, 1)^A and then scaled to the action box. The learner (learner.SAC),
// the actors (actor.Squashed) and the evaluator share these definitions,
// so that all three read the same policy from the same outputs.
const (
	// SquashedLogStdMin and SquashedLogStdMax bound log σ, as the SAC
	// authors' code does (softlearning: −20 and 2).
	SquashedLogStdMin = -20
	SquashedLogStdMax = 2
)

// SquashedLogStd is the log standard deviation a raw output x gives:
// x clamped to [SquashedLogStdMin, SquashedLogStdMax] (NaN stays NaN).
// Its derivative is 1 inside the bounds and 0 outside.
func SquashedLogStd(x float64) float64 {
	if x < SquashedLogStdMin {
		return SquashedLogStdMin
	}
	if x > SquashedLogStdMax {
		return SquashedLogStdMax
	}
	return x
}

// TanhLogDet is log(1 − tanh(u)²), the log of tanh's derivative, in the
// numerically stable form 2·(log 2 − u − softplus(−2u)): finite for any
// finite u, where the direct form reaches log 0 once tanh(u) rounds to ±1
// (|u| > 19). Its derivative is −2·tanh(u).
func TanhLogDet(u float64) float64 {
	return 2 * (math.Ln2 - u - softplus(-2*u))
}

// softplus is log(1 + e^x) without overflow for large x.
func softplus(x float64) float64 {
	if x > 30 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}
