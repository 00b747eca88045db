package model

import "math"

// Gaussian-policy maths of ReF-ER (Novati & Koumoutsakos 2019, arXiv
// 1807.05827, §2–3 and App. A): the importance ratio ρ = π(a|s)/μ(a|s)
// that decides whether a replayed step is near- or far-policy, the
// penalty KL(μ||π) and their gradients, for diagonal Gaussian policies.
// The learners (V-RACER, TD3 under ReF-ER) compute ρ and the KL with these
// and hand them to their ReF-ER controller; actors share the output layout
// (GaussianHead) and the std map (GaussStd) with the learner, so that a
// step's stored behaviour μ is exactly the policy the learner will compare
// with.
//
// Every function takes the dA values of one step: a (the unclipped action
// as sampled), (m, s) the current policy's mean and std, (mb, sb) the
// behaviour's. Stds must be > 0. Nothing allocates.

// MinStd is added to the softplus of a policy's std parameter (GaussStd):
// the std never reaches 0, so log densities, ρ and the KL stay finite
// even when a run without the KL penalty (plain ER) drives the std
// toward 0, which the paper's prototype saw reach KL > 1e50. At 1e-6 it
// is far below any std a working policy has (the initial one is 0.447).
const MinStd = 1e-6

// InitialStd is V-RACER's initial policy std, sqrt(0.2): the paper's
// Σ = 0.2·I is the variance (refer.md §7.5).
const InitialStd = 0.44721359549995793

// Softplus is log(1 + e^x), computed without overflow for large x and
// without losing the tail for very negative x.
func Softplus(x float64) float64 {
	if x > 30 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}

// SoftplusInv is the inverse of Softplus, log(e^y − 1), for y > 0.
func SoftplusInv(y float64) float64 {
	if y > 30 {
		return y + math.Log(-math.Expm1(-y))
	}
	return math.Log(math.Expm1(y))
}

// Sigmoid is 1/(1 + e^−x), Softplus's derivative.
func Sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// GaussStd is the policy std a std parameter u gives: Softplus(u) + MinStd.
// Its derivative is Sigmoid(u).
func GaussStd(u float64) float64 { return Softplus(u) + MinStd }

// GaussStdParam is the std parameter u with GaussStd(u) = s, for
// s > MinStd (the initialisation of a network's std bias).
func GaussStdParam(s float64) float64 { return SoftplusInv(s - MinStd) }

// GaussLogRatio is log π(a|s) − log μ(a|s) for diagonal Gaussians π =
// N(m, diag s²) and μ = N(mb, diag sb²), summed over the dA dimensions:
//
//	Σ_j log(sb_j/s_j) − (a_j−m_j)²/(2 s_j²) + (a_j−mb_j)²/(2 sb_j²)
//
// The untruncated densities are used, as the paper's code does (the
// actors' truncation at 3 std changes both densities by the same factor
// only when the stds agree; it is ignored). O(dA).
// Every slice has the action width dA: a shorter one panics (an
// unchecked per-row kernel of the learner's hot path).
func GaussLogRatio(a, m, s, mb, sb []float64) float64 {
	var lr float64
	for j := range a {
		d, db := a[j]-m[j], a[j]-mb[j]
		lr += math.Log(sb[j]/s[j]) - d*d/(2*s[j]*s[j]) + db*db/(2*sb[j]*sb[j])
	}
	return lr
}

// GaussKL is KL(μ||π) for μ = N(mb, diag sb²) and π = N(m, diag s²),
// Rule 2's penalty (Eq. 11):
//
//	Σ_j log(s_j/sb_j) + (sb_j² + (mb_j−m_j)²)/(2 s_j²) − 1/2
//
// O(dA).
// Every slice has the action width dA: a shorter one panics (an
// unchecked per-row kernel of the learner's hot path).
func GaussKL(mb, sb, m, s []float64) float64 {
	var kl float64
	for j := range m {
		d := mb[j] - m[j]
		kl += math.Log(s[j]/sb[j]) + (sb[j]*sb[j]+d*d)/(2*s[j]*s[j]) - 0.5
	}
	return kl
}

// GaussLogPiGrad sets dm and ds to the gradient of log π(a|s) with respect
// to π's mean and std: (a−m)/s² and ((a−m)²/s² − 1)/s per dimension. O(dA).
// Every slice has the action width dA: a shorter one panics (an
// unchecked per-row kernel of the learner's hot path).
func GaussLogPiGrad(dm, ds, a, m, s []float64) {
	for j := range a {
		d, inv := a[j]-m[j], 1/s[j]
		z := d * inv
		dm[j] = z * inv
		ds[j] = (z*z - 1) * inv
	}
}

// GaussKLGrad sets dm and ds to the gradient of KL(μ||π) (GaussKL) with
// respect to π's mean and std: (m−mb)/s² and 1/s − (sb² + (mb−m)²)/s³ per
// dimension. O(dA).
// Every slice has the action width dA: a shorter one panics (an
// unchecked per-row kernel of the learner's hot path).
func GaussKLGrad(dm, ds, mb, sb, m, s []float64) {
	for j := range m {
		d, inv := m[j]-mb[j], 1/s[j]
		dm[j] = d * inv * inv
		ds[j] = inv - (sb[j]*sb[j]+d*d)*inv*inv*inv
	}
}

// GaussKLReverse is KL(π||μ), the direction the paper's 2019 code
// computed (refer.md §7.1; the learner's KLReverse option):
//
//	Σ_j log(sb_j/s_j) + (s_j² + (m_j−mb_j)²)/(2 sb_j²) − 1/2
//
// O(dA).
// Every slice has the action width dA: a shorter one panics (an
// unchecked per-row kernel of the learner's hot path).
func GaussKLReverse(mb, sb, m, s []float64) float64 {
	var kl float64
	for j := range m {
		d := m[j] - mb[j]
		kl += math.Log(sb[j]/s[j]) + (s[j]*s[j]+d*d)/(2*sb[j]*sb[j]) - 0.5
	}
	return kl
}

// GaussKLReverseGrad sets dm and ds to the gradient of KL(π||μ) with
// respect to π's mean and std: (m−mb)/sb² and s/sb² − 1/s. O(dA).
// Every slice has the action width dA: a shorter one panics (an
// unchecked per-row kernel of the learner's hot path).
func GaussKLReverseGrad(dm, ds, mb, sb, m, s []float64) {
	for j := range m {
		ib := 1 / (sb[j] * sb[j])
		dm[j] = (m[j] - mb[j]) * ib
		ds[j] = s[j]*ib - 1/s[j]
	}
}

// GaussianHead is the output layout of a network that gives a state's
// value, a Gaussian policy's mean and its std parameter in one row (V-RACER,
// Novati & Koumoutsakos 2019, §2):
//
//	row[0]              V(s)
//	row[1 : 1+Dim]      the mean m(s), unbounded, in the policy's units
//	row[1+Dim : 1+2Dim] the std parameters u; std = GaussStd(u)
//
// The learner makes u state-independent (its weights stay 0, only the
// bias learns), so the std is a learned vector shared by all states, as
// in the paper. Actors and the learner read rows through one GaussianHead
// so that both see the same policy.
type GaussianHead struct {
	// Dim is the action dimension dA (>= 1).
	Dim int
}

// Width is the row width, 1 + 2·Dim.
func (h GaussianHead) Width() int { return 1 + 2*h.Dim }

// Value is row[0], V(s).
func (h GaussianHead) Value(row []float64) float64 { return row[0] }

// Mean is the mean part of row (a subslice, not a copy).
func (h GaussianHead) Mean(row []float64) []float64 { return row[1 : 1+h.Dim] }

// StdParams is the std-parameter part of row (a subslice).
func (h GaussianHead) StdParams(row []float64) []float64 { return row[1+h.Dim : 1+2*h.Dim] }

// Std writes the policy's stds, GaussStd of each std parameter of row,
// into std (Dim values).
func (h GaussianHead) Std(std, row []float64) {
	for j, u := range h.StdParams(row) {
		std[j] = GaussStd(u)
	}
}
