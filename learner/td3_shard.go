package learner

import (
	"math"

	"github.com/apexrl/apex/model"
)

// The data-parallel TD3 step (SetWorkers with W > 1), as DQN's (see
// dqn_shard.go): n = min(W, Batch) contiguous row shards, each with
// replicas of the actor, the target actor and the four critics
// (model.Net.Replica). The smoothing noise is drawn first, on the caller,
// for every row in row order (the serial step's draws, so the learner's
// stream stays the same). Phase one, on the shards: [s, a], the smoothed
// target actions, the clipped double-Q targets, both critics' forwards
// and |δ|. On the caller: the Normalizer's scale. Phase two, on the
// shards: each critic's loss sum (Loss.ValueSum, scaled by 1/Batch) and
// backward pass. On the caller: per critic one reduction in shard order
// into its Grads, then the serial step's checks, Adam steps and
// write-back (without a Normalizer, one Run does phases one and two). On
// a delayed step, phase three on the shards: the actor's
// DPG gradient through the updated first critic (whose replicas read the
// updated parameters), reduced in shard order into the actor's Grads,
// then its Adam step. ReF-ER (its ratios, KL and per-row DPG weights)
// runs serially: SetWorkers refuses W > 1 with it.

// td3Shard is one shard's networks and scratch.
type td3Shard struct {
	lo, hi     int
	actor      *model.Net
	actorTarg  *model.Net
	critic     [2]*model.Net
	criticTarg [2]*model.Net
	loss       [2]float64 // Σ w·ρ(δ_k) over its rows
	qsum       float64    // Σ Q_1(s, m·μ(s)) over its rows (phase three)
}

// td3Shards is the sharded step's state: nil for the serial step.
type td3Shards struct {
	w      Workers
	shards []td3Shard
	grads  [3][][]float64 // per shard: critic 1's, critic 2's and the actor's gradient vectors
	weight []float64      // the step's loss weights (nil: all 1), for phase two
	phase  int            // the phase bits the next Run runs (phaseForward, ...)
	run    func(int)      // l.runShard, bound once
}

// SetWorkers makes the learner's later steps data parallel over w, as
// DQN.SetWorkers does (td3_shard.go describes the step): nil or W = 1
// restores the serial step, bit for bit today's. A learner with ReF-ER
// refuses W > 1 (ErrConfig): its step runs serially. Workers are not
// state. Call it while no Step runs (ErrBusy otherwise). Cost: six
// network replicas per shard; allocates.
func (l *TD3) SetWorkers(w Workers) error {
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
	if l.refer != nil {
		return errorf(ErrConfig, "%d workers with ReF-ER: its TD3 step runs serially (use 1 worker)", w.Workers())
	}
	p := &td3Shards{w: w, shards: make([]td3Shard, n)}
	for k := range p.grads {
		p.grads[k] = make([][]float64, n)
	}
	for s := range p.shards {
		lo, hi := shardRange(l.cfg.Batch, n, s)
		sh := &p.shards[s]
		*sh = td3Shard{lo: lo, hi: hi, actor: l.actor.Replica(), actorTarg: l.actorTarg.Replica()}
		for k := range 2 {
			sh.critic[k], sh.criticTarg[k] = l.critic[k].Replica(), l.criticTarg[k].Replica()
			p.grads[k][s] = sh.critic[k].Grads()
		}
		p.grads[2][s] = sh.actor.Grads()
	}
	p.run = l.runShard
	l.par = p
	return nil
}

// criticsSharded is Step's critic phase on the shards: it returns the
// critic loss (the sum of both critics' batch means) with both critics'
// Grads set, or an error as Step's (a Normalizer's).
func (l *TD3) criticsSharded(rs *replayStep, weight []float64) (float64, error) {
	p := l.par
	l.drawNoise()
	if l.m.Normalizer == nil { // the weights are final: one Run
		p.weight, p.phase = weight, phaseBoth
		p.w.Run(len(p.shards), p.run)
	} else {
		p.phase = phaseForward
		p.w.Run(len(p.shards), p.run)
		weight, err := rs.scale(weight)
		if err != nil {
			return 0, err
		}
		p.weight, p.phase = weight, phaseBackward
		p.w.Run(len(p.shards), p.run)
	}
	p.weight = nil
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

// actorGradSharded is actorGrad on the shards (without ReF-ER): the actor
// loss −(1/B) Σ_i Q_1(s_i, m·μ(s_i)), its gradient reduced into the
// actor's Grads.
func (l *TD3) actorGradSharded() float64 {
	p := l.par
	p.phase = phaseActor
	p.w.Run(len(p.shards), p.run)
	var sum float64
	for s := range p.shards {
		sum += p.shards[s].qsum
	}
	model.SumGrads(l.actor.Grads(), p.grads[2]...)
	return -sum / float64(l.cfg.Batch)
}

// drawNoise fills noise with the target-policy smoothing noise, drawn in
// row order from the learner's stream exactly as targetActions draws it.
func (l *TD3) drawNoise() {
	mx := l.cfg.MaxAction
	sigma, lim := l.cfg.PolicyNoise*mx, l.cfg.NoiseClip*mx
	for i := range l.noise {
		e := 0.0
		if sigma > 0 {
			e = max(-lim, min(lim, sigma*l.rng.NormFloat64()))
		}
		l.noise[i] = e
	}
}

// runShard runs the current phase of shard s (td3_shard.go). It writes
// only rows [lo, hi) of the learner's row scratch and the shard's own
// networks.
func (l *TD3) runShard(s int) {
	p := l.par
	sh := &p.shards[s]
	lo, hi := sh.lo, sh.hi
	b, nS, nA := l.batch, l.nS, l.nA
	x, mx := nS+nA, l.cfg.MaxAction
	obs, xa := l.obs[lo*nS:hi*nS], l.xa[lo*x:hi*x]
	if p.phase&phaseForward != 0 {
		next, xn := l.next[lo*nS:hi*nS], l.xn[lo*x:hi*x]
		to64(obs, b.Obs[lo*nS:hi*nS])
		to64(next, b.NextObs[lo*nS:hi*nS])
		l.joinRows(xa, obs, nil, b.ActionVec[lo*nA:hi*nA])
		l.joinRows(xn, next, sh.actorTarg.Forward(next), nil)
		for i := lo; i < hi; i++ {
			for j := range nA {
				q := &l.xn[i*x+nS+j]
				*q = max(-mx, min(mx, *q+l.noise[i*nA+j]))
			}
		}
		y := l.y[lo:hi]
		copy(y, sh.criticTarg[0].Forward(xn))
		qt := sh.criticTarg[1].Forward(xn)
		for i := range y {
			v := float64(b.Reward[lo+i])
			if d := b.Discount[lo+i]; d != 0 {
				v += float64(d) * min(y[i], qt[i])
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
		inv := 1 / float64(l.cfg.Batch)
		for k, c := range sh.critic {
			g := l.grad[k][lo:hi]
			sh.loss[k] = l.m.Loss.ValueSum(g, l.q[k][lo:hi], l.y[lo:hi], w, inv)
			c.Backward(g)
		}
	}
	if p.phase&phaseActor != 0 {
		xp := l.xp[lo*x : hi*x]
		l.joinRows(xp, obs, sh.actor.Forward(obs), nil)
		var sum float64
		for _, v := range sh.critic[0].Forward(xp) {
			sum += v
		}
		sh.qsum = sum
		dx := sh.critic[0].BackwardInput(l.dqa[lo:hi])
		du := l.du[lo*nA : hi*nA]
		for i := range hi - lo {
			for j := range nA {
				du[i*nA+j] = mx * dx[i*x+nS+j]
			}
		}
		sh.actor.Backward(du)
	}
}
