package learner

import (
	"math"

	"github.com/apexrl/apex/model"
)

// The data-parallel SAC step (SetWorkers with W > 1), as DQN's and TD3's
// (dqn_shard.go, td3_shard.go): n = min(W, Batch) contiguous row shards,
// each with replicas of the policy and the four critics and its own
// log-std scratch. Both noise draws stay on the caller in row order (the
// target actions' before the critic phase, the policy's before the policy
// phase), so the learner's stream is the serial step's. Critic phase on
// the shards: [s, a], the soft targets, both critics' forwards and |δ|;
// the Normalizer's scale on the caller (one Run for both halves without
// one); each critic's loss sum and backward pass; per critic one
// reduction in shard order. Policy phase on the shards, through the
// updated critics: the reparameterised actions, log π, both critics on
// them, the policy loss's sum and the policy's backward pass; one
// reduction in shard order. The temperature step uses the whole batch's
// log π as the serial step does.

// sacShard is one shard's networks and scratch.
type sacShard struct {
	lo, hi     int
	policy     *model.Net
	critic     [2]*model.Net
	criticTarg [2]*model.Net
	ls         []float64  // A: one row's clamped log stds
	pout       []float64  // the policy replica's outputs of the policy phase
	loss       [2]float64 // Σ w·ρ(δ_k) over its rows
	psum       float64    // Σ α·log π − min_k Q_k over its rows
}

// sacShards is the sharded step's state: nil for the serial step.
type sacShards struct {
	w      Workers
	shards []sacShard
	grads  [3][][]float64 // per shard: critic 1's, critic 2's and the policy's gradient vectors
	weight []float64      // the step's loss weights (nil: all 1)
	alpha  float64        // the step's temperature
	phase  int            // the phase bits the next Run runs (phaseForward, ...; phaseActor: the policy)
	run    func(int)      // l.runShard, bound once
}

// SetWorkers makes the learner's later steps data parallel over w, as
// DQN.SetWorkers does (sac_shard.go describes the step): nil or W = 1
// restores the serial step, bit for bit today's. Workers are not state.
// Call it while no Step runs (ErrBusy otherwise). Cost: five network
// replicas per shard; allocates.
func (l *SAC) SetWorkers(w Workers) error {
	if err := l.busy.enter(&opSetWorkers); err != nil {
		return err
	}
	defer l.busy.exit()
	n, err := shardCount(w, l.cfg.Batch)
	if err != nil {
		return err
	}
	if n == 1 {
		l.par = nil
		return nil
	}
	p := &sacShards{w: w, shards: make([]sacShard, n)}
	for k := range p.grads {
		p.grads[k] = make([][]float64, n)
	}
	for s := range p.shards {
		lo, hi := shardRange(l.cfg.Batch, n, s)
		sh := &p.shards[s]
		*sh = sacShard{lo: lo, hi: hi, policy: l.policy.Replica(), ls: make([]float64, l.nA)}
		for k := range 2 {
			sh.critic[k], sh.criticTarg[k] = l.critic[k].Replica(), l.criticTarg[k].Replica()
			p.grads[k][s] = sh.critic[k].Grads()
		}
		p.grads[2][s] = sh.policy.Grads()
	}
	p.run = l.runShard
	l.par = p
	return nil
}

// criticsSharded is Step's critic phase on the shards: it returns the
// critic loss with both critics' Grads set, or an error as Step's (a
// non-finite target, a Normalizer's).
func (l *SAC) criticsSharded(rs *replayStep, weight []float64, alpha float64, step uint64) (float64, error) {
	p := l.par
	for i := range l.epsN {
		l.epsN[i] = l.rng.NormFloat64()
	}
	p.alpha = alpha
	if l.m.Normalizer == nil {
		p.weight, p.phase = weight, phaseBoth
		p.w.Run(len(p.shards), p.run)
	} else {
		p.phase = phaseForward
		p.w.Run(len(p.shards), p.run)
		if err := model.CheckFinite("critic target", l.y); err != nil {
			return 0, l.fail(step, nil, err)
		}
		weight, err := rs.scale(weight)
		if err != nil {
			return 0, err
		}
		p.weight, p.phase = weight, phaseBackward
		p.w.Run(len(p.shards), p.run)
	}
	p.weight = nil
	if err := model.CheckFinite("critic target", l.y); err != nil {
		return 0, l.fail(step, nil, err)
	}
	inv := 1 / float64(l.cfg.Batch)
	var loss float64
	for k := range l.critic {
		var sum float64
		for s := range p.shards {
			sum += p.shards[s].loss[k]
		}
		loss += sum * inv
		model.SumGrads(l.critic[k].Grads(), p.grads[k]...)
	}
	return loss, nil
}

// policyGradSharded is policyGrad on the shards: the policy loss, its
// gradient reduced into the policy's Grads, log π of every row in logp.
func (l *SAC) policyGradSharded(alpha float64) float64 {
	p := l.par // Step has drawn epsP
	p.alpha, p.phase = alpha, phaseActor
	p.w.Run(len(p.shards), p.run)
	var sum float64
	for s := range p.shards {
		sum += p.shards[s].psum
	}
	model.SumGrads(l.policy.Grads(), p.grads[2]...)
	return sum / float64(l.cfg.Batch)
}

// sampleShard is sample on shard sh's policy replica and scratch, for
// the rows of obs (and the matching rows of dst, eps, u and logp).
func (l *SAC) sampleShard(sh *sacShard, dst, obs, eps, u, logp []float64) []float64 {
	out := sh.policy.Forward(obs)
	nS, nA, mx := l.nS, l.nA, l.cfg.MaxAction
	x := nS + nA
	lsr := sh.ls
	for i := range len(logp) {
		row := out[i*2*nA : (i+1)*2*nA]
		d := dst[i*x : (i+1)*x]
		copy(d[:nS], obs[i*nS:(i+1)*nS])
		for j := range nA {
			lsr[j] = model.SquashedLogStd(row[nA+j])
			v := row[j] + math.Exp(lsr[j])*eps[i*nA+j]
			u[i*nA+j] = v
			d[nS+j] = mx * math.Tanh(v)
		}
		logp[i] = sacLogProb(u[i*nA:(i+1)*nA], lsr, eps[i*nA:(i+1)*nA])
	}
	return out
}

// runShard runs the current phase of shard s (sac_shard.go). It writes
// only rows [lo, hi) of the learner's row scratch and the shard's own
// networks and scratch.
func (l *SAC) runShard(s int) {
	p := l.par
	sh := &p.shards[s]
	lo, hi := sh.lo, sh.hi
	b, nS, nA := l.batch, l.nS, l.nA
	x, mx, alpha := nS+nA, l.cfg.MaxAction, p.alpha
	inv := 1 / float64(l.cfg.Batch)
	obs := l.obs[lo*nS : hi*nS]
	rowsA := func(v []float64) []float64 { return v[lo*nA : hi*nA] }
	if p.phase&phaseForward != 0 {
		next, xa, xn := l.next[lo*nS:hi*nS], l.xa[lo*x:hi*x], l.xn[lo*x:hi*x]
		to64(obs, b.Obs[lo*nS:hi*nS])
		to64(next, b.NextObs[lo*nS:hi*nS])
		for i := range hi - lo {
			row := xa[i*x : (i+1)*x]
			copy(row[:nS], obs[i*nS:(i+1)*nS])
			for j, v := range b.ActionVec[(lo+i)*nA : (lo+i+1)*nA] {
				row[nS+j] = float64(v)
			}
		}
		logp := l.logp[lo:hi]
		l.sampleShard(sh, xn, next, rowsA(l.epsN), rowsA(l.u), logp)
		y := l.y[lo:hi]
		copy(y, sh.criticTarg[0].Forward(xn))
		qt := sh.criticTarg[1].Forward(xn)
		for i := range y {
			v := float64(b.Reward[lo+i])
			if d := b.Discount[lo+i]; d != 0 {
				v += float64(d) * (min(y[i], qt[i]) - alpha*logp[i])
			}
			y[i] = v
		}
		for k, c := range sh.critic {
			copy(l.q[k][lo:hi], c.Forward(xa))
		}
		for i := lo; i < hi; i++ {
			l.absTD[i] = max(math.Abs(l.q[0][i]-l.y[i]), math.Abs(l.q[1][i]-l.y[i]))
		}
	}
	if p.phase&phaseBackward != 0 {
		var w []float64
		if p.weight != nil {
			w = p.weight[lo:hi]
		}
		for k, c := range sh.critic {
			g := l.grad[k][lo:hi]
			sh.loss[k] = l.m.Loss.ValueSum(g, l.q[k][lo:hi], l.y[lo:hi], w, inv)
			c.Backward(g)
		}
	}
	if p.phase&phaseActor != 0 {
		xp, u, eps, logp := l.xp[lo*x:hi*x], rowsA(l.u), rowsA(l.epsP), l.logp[lo:hi]
		sh.pout = l.sampleShard(sh, xp, obs, eps, u, logp)
		for k, c := range sh.critic {
			copy(l.qp[k][lo:hi], c.Forward(xp))
		}
		var sum float64
		for i, lp := range logp {
			sum += alpha*lp - min(l.qp[0][lo+i], l.qp[1][lo+i])
		}
		sh.psum = sum
		for k := range sh.critic {
			clear(l.grad[k][lo:hi])
		}
		for i := lo; i < hi; i++ {
			k := 0
			if l.qp[1][i] < l.qp[0][i] {
				k = 1
			}
			l.grad[k][i] = -inv
		}
		da := rowsA(l.da)
		clear(da)
		for k, c := range sh.critic {
			dx := c.BackwardInput(l.grad[k][lo:hi])
			for i := range hi - lo {
				for j := range nA {
					da[i*nA+j] += dx[i*x+nS+j]
				}
			}
		}
		dout := l.dout[lo*2*nA : hi*2*nA]
		for i := range hi - lo {
			row := sh.pout[i*2*nA : (i+1)*2*nA]
			d := dout[i*2*nA : (i+1)*2*nA]
			for j := range nA {
				raw := row[nA+j]
				ls := model.SquashedLogStd(raw)
				sigma, e := math.Exp(ls), eps[i*nA+j]
				t := math.Tanh(u[i*nA+j])
				gu := alpha*2*t*inv + da[i*nA+j]*mx*(1-t*t)
				d[j] = gu
				if raw > model.SquashedLogStdMin && raw < model.SquashedLogStdMax {
					d[nA+j] = gu*sigma*e - alpha*inv
				} else {
					d[nA+j] = 0
				}
			}
		}
		sh.policy.Backward(dout)
	}
}
