package learner

import (
	"math"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// td3Refer is TD3 with Remember and Forget Experience Replay (Novati &
// Koumoutsakos 2019, the DDPG arm, Alg. 4, adapted to TD3): the state a
// TD3 keeps when its method is a ReF-ER one (Method.Episodes set), beside
// the ReF-ER controller it builds over the method's stage.
//
// The actors explore with Gaussian noise of a fixed std (actor.Continuous
// with ContinuousConfig.Floats), so each stored step holds the behaviour
// μ_t = N(m_b, diag s_b²): m_b = ScaleAction(π_b(s_t)) and s_b = σ·half
// in the REFER mean and std columns, and the unclipped sample a_t as its
// action. The current policy is taken as π = N(m, diag s_b²) with
// m = MaxAction·μ(s_t) and the same std, so per sampled row
//
//	log rho = clamp(Σ_j ((a_j−m_bj)² − (a_j−m_j)²)/(2 s_bj²), −7, 7),  rho = min(e^(log rho), RhoClip)
//	KL      = KL(μ_t||π) = Σ_j (m_j − m_bj)²/(2 s_bj²)
//
// and with the controller's RowWeights (algW, klW; refer: beta·1[near], 1−beta):
//
//   - the critics' per-row weight is 1[near] (refer, refer-1; 1 for
//     refer-2 and er) times the method's weight: far rows get no critic
//     gradient; the critics see the stored action clipped to the box (what
//     the environment played);
//   - the actor's loss is (1/B) Σ_i algW_i·(−Q_1(s_i, m_i)) + klW_i·KL_i,
//     i.e. beta·DPG on near rows minus (1−beta)·∇KL on all rows;
//   - after the step the rows' rho, Q_1(s, a) (as the stage's V) and KL are
//     written back (Refresh) and AfterStep(k) moves c_max and beta;
//   - both Adam step sizes are the configured ones times the controller's
//     LRScale, 1/(1 + A·k) (Eq. 13), set before each step.
//
// TD3 keeps its own critic targets, so the controller's Retrace targets
// are unused: build the method with REFERConfig.NoRetrace to skip their
// sweeps (the runtime does).
type td3Refer struct {
	ctl             *REFERController
	meanCol, stdCol int
	rho, kl         []float64 // B: the rows' ratios and KL(μ||π), before the step's updates
	algW, klW       []float64 // B: the stage's RowWeights
	cw              []float64 // B: the critics' weights, the method's times the near mask
	skipFar         bool      // the variant zeroes far rows' critic gradient
	m               []float64 // A: the current mean of one row
	a, mb, sb       []float64 // A: one row's action, behaviour mean and std
}

// newTD3Refer returns the ReF-ER state over the method's stage src and a
// buffer of config bc, for batches of b rows and nA action dimensions.
func newTD3Refer(src sampler.EpisodeSource, bc buffer.Config, b, nA int) (*td3Refer, error) {
	mc, sc, _, err := sampler.REFERColumnIndex(bc)
	if err != nil {
		return nil, errorf(ErrConfig, "td3 with ReF-ER: %w", err)
	}
	ctl, err := NewREFERController(src)
	if err != nil {
		return nil, err
	}
	v := ctl.Config().Variant
	return &td3Refer{ctl: ctl, meanCol: mc, stdCol: sc,
		skipFar: v == sampler.REFERFull || v == sampler.REFERSkipOnly,
		rho:     make([]float64, b), kl: make([]float64, b), algW: make([]float64, b), klW: make([]float64, b),
		cw: make([]float64, b), m: make([]float64, nA), a: make([]float64, nA), mb: make([]float64, nA), sb: make([]float64, nA)}, nil
}

// td3ReferLogRhoClip bounds log rho, as V-RACER does (the paper's code).
const td3ReferLogRhoClip = 7

// row loads row i's action, behaviour mean and std from the batch.
func (r *td3Refer) row(b *buffer.Batch, i int) {
	nA := len(r.a)
	for j := range nA {
		r.a[j] = float64(b.ActionVec[i*nA+j])
		r.mb[j] = float64(b.Floats[r.meanCol][i*nA+j])
		r.sb[j] = float64(b.Floats[r.stdCol][i*nA+j])
	}
}

// ratios computes every row's rho and KL from the actor's outputs u (B×A,
// in [−1, 1]) scaled by mx, the row weights, and the critics' weights
// from the method's weight (nil: 1). It returns the critics' weights.
func (r *td3Refer) ratios(b *buffer.Batch, u []float64, mx float64, weight []float64) ([]float64, error) {
	nA, clip := len(r.a), r.ctl.RhoClip()
	for i := range r.rho {
		r.row(b, i)
		for j := range nA {
			r.m[j] = mx * u[i*nA+j]
		}
		lr := model.GaussLogRatio(r.a, r.m, r.sb, r.mb, r.sb)
		lr = max(-td3ReferLogRhoClip, min(td3ReferLogRhoClip, lr))
		r.rho[i] = min(math.Exp(lr), clip)
		r.kl[i] = model.GaussKL(r.mb, r.sb, r.m, r.sb)
	}
	if err := r.ctl.RowWeights(r.rho, r.algW, r.klW); err != nil {
		return nil, err
	}
	for i, x := range r.rho {
		w := 1.0
		if weight != nil {
			w = weight[i]
		}
		if r.skipFar && !r.ctl.Near(x) {
			w = 0
		}
		r.cw[i] = w
	}
	return r.cw, nil
}

// klGrad adds to du (B×A, holding mx·∂L/∂a of the weighted DPG term) the
// KL term's gradient mx·klW_i·(m − m_b)/s_b²/B, u being the actor's
// outputs (B×A), and returns that term's loss (1/B) Σ_i klW_i·KL_i.
func (r *td3Refer) klGrad(b *buffer.Batch, du, u []float64, mx float64) float64 {
	nA := len(r.a)
	inv := 1 / float64(len(r.rho))
	var loss float64
	for i := range r.rho {
		r.row(b, i)
		var kl float64
		for j := range nA {
			d := mx*u[i*nA+j] - r.mb[j]
			s2 := r.sb[j] * r.sb[j]
			kl += d * d / (2 * s2)
			du[i*nA+j] += mx * r.klW[i] * d / s2 * inv
		}
		loss += r.klW[i] * kl
	}
	return loss * inv
}
