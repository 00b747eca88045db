// Package learner holds apex's learners: the update rules that replay
// sampled batches, train a network, write priorities back through the
// sampler stage and publish parameters to the actors. This file set holds
// the Ape-X learner, DQN: Double DQN with n-step targets and a target
// network (Horgan et al. 2018, arXiv:1803.00933; van Hasselt et al. 2016,
// arXiv:1509.06461).
//
// A learner is a pure state machine driven by its caller, like raft's
// RawNode: it starts no goroutines, reads no clock and draws from its own
// seeded random stream. The runtime calls Step from its learner goroutine
// (DQN implements runtime.Stepper); everything else (pacing against
// inserts, stopping, checkpoint files) is the runtime's.
//
// # Usage
//
// An embedder's duties:
//
//  1. Build the online network with model.NewNet(model.Config{...}, rng);
//     give actors the same Config (model.Config{Dueling: true} for the
//     dueling head: the learner treats every Q network alike).
//  2. Build the buffer (buffer.New, discrete actions, ObsDim = the
//     network's input width), a replay method over it
//     (sampler.NewMethod("per", buf, ...): the selection stage, its
//     weights, its batch normaliser and its loss, paired as their papers
//     derive them) and a model.Store for the actors.
//  3. NewDQN(cfg, net, buf, method, store): it makes the target network
//     and the optimizer, allocates every buffer it needs, and publishes
//     version 0 so actors can act before the first update. The actors
//     take method.Selector for their insert priorities.
//  4. Insert transitions as actors produce them: Reward the n-step return,
//     Discount γ^m (0 at a termination), as actor.NStep writes them.
//  5. Call Step from one goroutine once the buffer holds at least Batch
//     items (the runtime's rate limiter waits for its minimum size). A
//     non-nil error stops the run: a *model.NonFiniteError (errors.Is
//     model.ErrNonFinite) names the step and the NaN or infinite value.
//  6. Read Stats from any goroutine for progress and metrics.
//  7. Checkpoint with Save (together with buffer.Buffer.Save, with the
//     learner and the inserters stopped) and resume with Load on a learner
//     built the same way.
//
// # Costs
//
// Measured by bench_test.go on the 2-core development machine for the
// reference 4→64→64→2 ReLU network with proportional PER over 2^16 items
// (go test -run '^$' -bench . ./learner), default cadences: a Step takes
// about 0.39 ms at Batch 64 (about 2.5k steps/s) and 1.6 ms at Batch 256
// (about 630 steps/s), with no allocation except one published snapshot
// every PublishEvery steps (40 KiB for that network). Over 90% of a step
// is the network: three forward passes (online and target on s', online
// on s) and one backward pass; sampling, importance weights, Adam and the
// priority write-back share the rest.
package learner
