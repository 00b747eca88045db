package sampler

import "github.com/apexrl/apex/buffer"

// SetTERTrace makes t call expand when a sweep expands a vertex (its state
// hash; root: one of the sweep's roots) and queue when it queues a
// transition (to: the vertex being expanded, from: its predecessor).
func SetTERTrace(t *TER, expand func(sweep, vertex uint64, root bool), queue func(sweep, to, from uint64, ref buffer.Ref)) {
	t.trace = &terTrace{expand: expand, queue: queue}
}

// CheckTERGraph verifies the invariants of t's graph.
func CheckTERGraph(t *TER) error { return t.g.check() }

// TERQueueSlots is the length of t's batch-queue slice, consumed prefix
// included (its memory).
func TERQueueSlots(t *TER) int { return len(t.sw.queue) }

// TERDeadVertices is the number of vertices waiting to be freed.
func TERDeadVertices(t *TER) int { return len(t.g.dead) }
