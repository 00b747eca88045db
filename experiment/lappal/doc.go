// Package lappal runs the linear-Gaussian regression experiment of the
// LAP/PAL design notes (Fujimoto, Meger & Precup 2020, arXiv:2007.06049):
// with fixed targets, the setting of the paper's theorems, does each replay
// method's SGD land on the fixed point its expected gradient predicts?
// Uniform+MSE should reach ordinary least squares, PER+MSE Eq. 7's
// minimiser of Σ|δ|^(2+a−ab), LAP and PAL the minimiser of the PAL loss,
// and uniform+L1 the least-absolute-deviations fit. The acceptance
// test is that each lands within 2% of its prediction.
//
// The package is pure: no goroutines, no clock, no global random state.
// Every random choice comes from generators seeded from
// RegressionConfig.Seed, so a config always gives the same result.
//
// # Setting
//
// Data: N points x_i = (1, z_i1, …, z_i,d−1), z ~ N(0, 1), and
// y_i = wᵀx_i + ε_i with ε ~ N(0, 1) (the "gaussian" setting) or a one-sided
// outlier mixture 0.9·N(0, 1) + 0.1·N(+8, 1) ("skewed"). The points are
// stored once each in an apex buffer.Buffer (obs = x, reward = y, both
// float32; the references are computed on the same rounded values).
//
// Learning: a linear model, δ_j = x_jᵀw − y_j (the paper's δ = Q − y). Each
// method is built by sampler.NewMethod over its own buffer of the data and
// used as a learner uses it: Selector.Sample draws B rows, the Weighter (if
// any) sets v_j, the Normalizer (if any) gives the batch scale s, and
//
//	w ← w − η_t · (1/B) Σ_j v_j · s · ρ'(δ_j) · x_j,
//
// with ρ' = Loss.Derivative; then |δ_j| (before the step) goes back through
// Selector.Update. Step sizes follow Robbins–Monro, η_t = η_0·(1 + t/τ)^−γ
// with γ ∈ (0.5, 1] (Σ η_t = ∞, Σ η_t² < ∞), and the learned w is the
// Polyak–Ruppert average of the iterates over the last part of the run.
//
// # Predicted fixed points
//
// A fixed point of the averaged iterates is a root of the expected step,
// E[Σ_j v_j s ρ'(δ_j) x_j] = 0 over the draw of the batch:
//
//   - uniform + MSE: Σ_i 2δ_i x_i = 0, ordinary least squares (SolveOLS).
//   - PER + MSE: item i is drawn with P(i) = p_i/Σ_j p_j,
//     p_i = (|δ_i| + eps)^a, and weighted by v_i = (N·P(i))^−b/C, where C
//     is the buffer-wide maximum weight (buffer.NormalizeBuffer): one
//     constant per step, the same whichever rows are drawn. So
//     E ∝ Σ_i P(i)·v_i·δ_i x_i ∝ Σ_i p_i^(1−b) δ_i x_i
//     = Σ_i (|δ_i| + eps)^(a(1−b)) δ_i x_i, the gradient of
//     Σ_i |δ_i|^(2+a−ab)/(2+a−ab) when eps = 0: Theorem 3, Eq. 7 (with
//     a = 0.6, b = 0.4, the power 2.36). The reference keeps the stage's eps
//     (PERInfluence; Newton's method, SolveNewton). Normalising by the
//     batch's largest weight (NormalizeBatch) would make C depend on the
//     draw and move the fixed point; the config refuses it.
//   - LAP (Huber(k), no IS weights): P(i) ∝ max(|δ_i|, k)^α, so
//     E ∝ Σ_i max(|δ_i|, k)^α clip(δ_i, −k, k) x_i = Σ_i PAL'(δ_i) x_i:
//     LAP's expected gradient is PAL's times the positive factor 1/λ
//     (Observation 4), so its fixed point is the PAL loss's minimiser
//     (PALInfluence; SolveNewton on PAL's continuous potential: the loss as
//     printed jumps at |δ| = k, its gradient does not).
//   - uniform + PAL: the same root, up to the batch normaliser (below).
//   - uniform + L1: Σ_i sign(δ_i) x_i = 0, least absolute deviations: the
//     median for an intercept-only model (SolveLAD: IRLS, then the exact
//     fit of the rows the optimum interpolates).
//
// The priorities are stochastic: an item's stored priority is its |δ| at
// its last replay (or the initial maximum), not at the current w. At a
// fixed point w no longer moves, so every item replayed since holds
// priority f(|δ_i(w)|) for the current w, and the expected step is the one
// above evaluated with priorities equal to the current |δ|: its root is
// what the minimisers above characterise. Items not replayed since w
// settled hold slightly stale priorities, an effect that vanishes as
// η_t → 0 (every item has probability at least min P(i) > 0 per row).
//
// PAL's normaliser is the batch mean λ̂ of max(|δ_j|, k)^α, as in the
// authors' code and sampler.PAL, not the buffer-wide λ of the theorem. A
// row with a large |δ| raises its own batch's λ̂ and so damps its own pull:
// the fixed point moves by O(1/B) toward the inliers. Measured on the
// skewed setting over 3 seeds: relative error 1.4% at B = 8, 0.3–0.4% at
// B = 32 (the default), 0.04–0.13% at B = 128, while LAP stays below 0.1%.
// LAP and PAL share a fixed point exactly only with the exact λ.
//
// # Usage
//
//	cfg := lappal.DefaultRegressionConfig() // N = 2000, 200k steps of 32
//	res, err := lappal.RunRegression(cfg)
//	...
//	lappal.WriteRegressionTable(os.Stdout, res)
//	if !res.AllWithin() { ... }
//
// The command `apex experiment lap-pal` does this; the default config takes
// about 9 s on a 2-core machine (10 runs of 200k steps).
//
// # Choices where the notes are silent
//
//  1. d = 3: a bias feature and two standard normal features, w = (0.5, 2,
//     −1); 10% outliers shifted by +8 in the skewed setting.
//  2. Fixed targets: y never changes (no bootstrapping), the theorems'
//     setting.
//  3. PER: alpha 0.6, beta fixed at 0.4, the stage's default eps 1e-6
//     (kept in the reference), buffer-wide weight normalisation. LAP and
//     PAL: alpha 0.4, k 1 (the paper's continuous-control setting).
//  4. The MSE loss is model.MSE, ρ = δ² (gradient 2δ); the factor 2 only
//     scales the steps. One step-size schedule serves every method, from
//     w = 0, with new items at the buffer's initial priority 1.
//  5. Each method runs over a fresh buffer of the same data with its own
//     sampling stream, so one method's priorities never steer another.
package lappal
