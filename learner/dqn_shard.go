package learner

import (
	"math"

	"github.com/apexrl/apex/model"
)

// The data-parallel DQN step (SetWorkers with W > 1). The batch is cut
// into n = min(W, Batch) contiguous row shards, each with a replica of
// the online and the target network (model.Net.Replica: they read the
// learner's parameters and keep their own gradients). Phase one, on the
// shards: the rows' float64 observations, the Double-DQN targets, the
// training forward, Q(s, a) and |δ|. Then, on the caller: the
// Normalizer's scale of the whole batch's |δ|. Phase two, on the shards:
// each shard's loss sum and dL/dQ, scaled by 1/Batch (Loss.SelectedSum:
// the whole batch's mean, every gradient entry as the serial step's),
// and the backward pass into the replica's gradients. Then, on the
// caller: one reduction of the shards' gradients in shard order
// (model.SumGrads) into the online network's Grads, one Adam step, the
// priorities written back once: the rest of the serial step.
//
// The result differs from the serial step only in the order of the sums
// over rows (each layer's weight gradient is a sum over the batch that the
// shards split): float64 rounding, some 1e-15 relative, or float32's on
// the float32 path. The same W gives the same bits however Run schedules
// the shards.

// dqnShard is one shard's networks and scratch.
type dqnShard struct {
	lo, hi      int
	net, target *model.Net
	q           []float64 // the training forward's output (the replica's buffer)
	dq          []float64 // (hi−lo)×A: dL/dQ of its rows
	loss        float64   // Σ w·ρ(δ) over its rows
}

// dqnShards is the sharded step's state: nil for the serial step.
type dqnShards struct {
	w      Workers
	shards []dqnShard
	grads  [][]float64 // the replicas' gradient vectors, in shard order
	weight []float64   // the step's loss weights (nil: all 1), for phase two
	phase  int         // the phase bits the next Run runs (phaseForward, ...)
	run    func(int)   // l.runShard, bound once (Run allocates nothing)
}

// SetWorkers makes the learner's later steps data parallel over w: with
// W = w.Workers() > 1 its batch is cut into min(W, Batch) row shards run
// on w (see dqn_shard.go for the step and its precision); nil or W = 1
// restores the serial step, bit for bit today's. Workers are not state:
// checkpoints neither save nor need them. Call it while no Step runs
// (ErrBusy otherwise). Cost: with W > 1, two network replicas per shard
// (their gradients and scratch: O(parameters) each); allocates. Errors
// wrap ErrConfig (W < 1) or ErrBusy.
func (l *DQN) SetWorkers(w Workers) error {
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
	p := &dqnShards{w: w, shards: make([]dqnShard, n), grads: make([][]float64, n)}
	for s := range p.shards {
		lo, hi := shardRange(l.cfg.Batch, n, s)
		sh := &p.shards[s]
		*sh = dqnShard{lo: lo, hi: hi, net: l.net.Replica(), target: l.target.Replica(), dq: make([]float64, (hi-lo)*l.nA)}
		p.grads[s] = sh.net.Grads()
	}
	p.run = l.runShard
	l.par = p
	return nil
}

// opSetWorkers names SetWorkers for ErrBusy.
var opSetWorkers = "SetWorkers"

// stepSharded is Step's body after sampling and the action check, on the
// shards: it returns the loss (the whole batch's mean) with the online
// network's Grads set, or an error as Step's.
func (l *DQN) stepSharded(rs *replayStep, weight []float64) (float64, error) {
	p := l.par
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
	var sum float64
	for s := range p.shards {
		sum += p.shards[s].loss
	}
	model.SumGrads(l.net.Grads(), p.grads...)
	return sum / float64(l.cfg.Batch), nil
}

// runShard runs the current phase of shard s (see dqn_shard.go). It
// writes only rows [lo, hi) of the learner's row scratch and the shard's
// own networks and buffers.
func (l *DQN) runShard(s int) {
	p := l.par
	sh := &p.shards[s]
	lo, hi := sh.lo, sh.hi
	b := l.batch
	if p.phase&phaseForward != 0 {
		l.forwardShard(sh)
	}
	if p.phase&phaseBackward != 0 {
		var w []float64
		if p.weight != nil {
			w = p.weight[lo:hi]
		}
		sh.loss = l.m.Loss.SelectedSum(sh.dq, sh.q, b.Action[lo:hi], l.y[lo:hi], w, 1/float64(l.cfg.Batch))
		sh.net.Backward(sh.dq)
	}
}

// forwardShard is the forward half of shard sh: its rows' float64
// observations, Double-DQN targets, training forward, Q(s, a) and |δ|.
func (l *DQN) forwardShard(sh *dqnShard) {
	lo, hi := sh.lo, sh.hi
	b, nA := l.batch, l.nA
	in := l.net.In()
	obs, next := l.obs[lo*in:hi*in], l.next[lo*in:hi*in]
	to64(obs, b.Obs[lo*in:hi*in])
	to64(next, b.NextObs[lo*in:hi*in])
	qn := sh.net.Forward(next)
	astar := l.astar[lo:hi]
	for i := range astar {
		astar[i] = int32(model.Argmax(qn[i*nA : (i+1)*nA]))
	}
	model.Gather(l.qnext[lo:hi], sh.target.Forward(next), astar)
	for i := lo; i < hi; i++ {
		y := float64(b.Reward[i])
		if d := b.Discount[i]; d != 0 {
			y += float64(d) * l.qnext[i]
		}
		l.y[i] = y
	}
	sh.q = sh.net.Forward(obs)
	model.Gather(l.qsa[lo:hi], sh.q, b.Action[lo:hi])
	for i := lo; i < hi; i++ {
		l.absTD[i] = math.Abs(l.y[i] - l.qsa[i])
	}
}
