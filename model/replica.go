package model

// Replica returns a Net with n's configuration that reads n's own
// parameter vector (shared, not copied: an update of n's Params, by an
// optimizer, CopyFrom, SoftUpdate, SetParams or a checkpoint load, is
// seen by the replica at its next Forward) and has its own gradients,
// activations and scratch (float64 and float32 path alike). It is a
// data-parallel learner's shard: each shard's replica runs Forward and
// Backward on its rows, concurrently with the other replicas of n, into
// its own Grads, and the learner sums those (see SumGrads) into n's.
//
// Concurrency: any number of replicas of n (and n itself) may run Forward
// and Backward at the same time, each on its own goroutine, provided
// nothing writes n's parameters meanwhile; a replica must not modify its
// Params (they are n's). A replica is not safe for concurrent use itself.
//
// Cost: O(parameters) memory for the gradients (and the transposed and
// float32 scratch a Net keeps); allocates.
func (n *Net) Replica() *Net {
	r := &Net{cfg: n.Config(), nTrunk: n.nTrunk, nValue: n.nValue, params: n.params, grads: make([]float64, len(n.grads))}
	r.layers = make([]Dense, len(n.layers))
	for i := range n.layers {
		s, l := &n.layers[i], &r.layers[i]
		if err := l.init(s.in, s.out, s.act, n.params[s.off:], r.grads[s.off:]); err != nil {
			panic("model: Replica: " + err.Error()) // not reached: n's layers were validated
		}
		l.name, l.off = s.name, s.off
	}
	if r.cfg.Float32 {
		r.f32 = newNet32(r)
	}
	return r
}

// SumGrads sets dst to the sum of the gradient vectors srcs, added in
// their order (srcs[0] + srcs[1] + …, element by element): the one
// reduction of a data-parallel step, in a fixed order so that the same
// shards give the same bits. Every vector must have len(dst) entries (it
// panics otherwise, or on no srcs). Cost O(len(srcs)·len(dst)), no
// allocation.
func SumGrads(dst []float64, srcs ...[]float64) {
	if len(srcs) == 0 {
		panic("model: SumGrads of no vectors")
	}
	for k, s := range srcs {
		if len(s) != len(dst) {
			panic("model: SumGrads: a vector's length differs from dst's")
		}
		if k == 0 {
			copy(dst, s)
			continue
		}
		for i, v := range s {
			dst[i] += v
		}
	}
}
