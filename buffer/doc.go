// Package buffer is apex's replay memory: a fixed-capacity, striped,
// lock-free prioritized replay buffer for off-policy reinforcement learning.
//
// Transitions are stored row-major: an item's fields (float32
// observations, int32 or float32 actions, reward, discount, flags, and
// optional episode, step, actor, state-hash and extra float columns) form
// one record, padded to a power of two up to 64 bytes so that a sampled row
// costs one cache line, in Stripes independent FIFO rings. Callers see
// columns: Insert takes a columnar Transitions and a Batch holds columns. Each stripe has its own 16-ary sum tree of fixed-point priorities
// (and a min tree); a small top level of stripe totals joins them.
// Inserters, samplers and priority write-backs run concurrently without
// locks: every shared word is an atomic, tree nodes take atomic integer adds
// (exact and order-independent, so at quiescence each node equals the sum
// of its children with no drift), and each slot's priority shares one word
// with its generation so a write-back for an overwritten slot is dropped,
// never applied to the new occupant.
//
// The package is a pure data structure: it starts no goroutines, reads no
// clock and uses no global random source (sampling takes a *rand.Rand).
//
// # Usage
//
// An embedder's duties:
//
//  1. Build the buffer with New(Config{Capacity: ..., ObsDim: ...}); New
//     validates the config and says which field is wrong, and refuses one
//     that would need more than MaxBytes. Config.MemoryBytes says how much
//     New will allocate, to compare with the machine's memory first.
//  2. Insert batches of transitions (Transitions, columnar) from any number
//     of goroutines. Give each item a priority (Ape-X actors compute their
//     own) or leave Priority nil for the maximum seen so far.
//  3. Sample batches into a reusable Batch (NewBatch) with a *rand.Rand owned
//     by the sampling goroutine: Sample (stratified proportional, PER) or
//     SampleUniform. Each row carries its Ref (slot and generation) and the
//     probability it was drawn with; ImportanceWeights turns those into PER
//     weights.
//  4. Write new priorities back with UpdatePriorities(batch.Refs, ...); refs
//     whose slot was overwritten meanwhile are dropped and counted.
//  5. Read Stats for metrics; call Save/Load and CheckInvariants only while
//     no goroutine writes. SaveStriped checkpoints while everything runs:
//     it holds one stripe at a time, for that stripe's copy (inserts go
//     to the other stripes, a write-back to it waits for the copy,
//     sampling goes on); each stripe is a consistent snapshot at its own
//     instant, the learner-side counters are read after the last stripe
//     (snapshot.go), and Load reads it as it reads Save's checkpoints.
//  6. A stage that keeps its own index over the contents (TER's state
//     graph) follows new items with a Watcher (NewWatcher, Poll) from its
//     owner goroutine: no lock and no extra work on Insert.
//
// Selection methods beyond proportional and uniform (rank-based PER and the
// other papers' stages) live in package sampler and use GatherSlot /
// GatherRef to read the items they choose.
//
// # Costs
//
// At 2^20 slots one batch of 256 stratified samples with their data plus 256
// write-backs, and inserts of 44-byte transitions, are measured by the
// benchmarks in bench_test.go; bench/BENCHMARKS.md records the figures.
package buffer
