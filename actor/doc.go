// Package actor is the Ape-X actor (Horgan et al. 2018, "Distributed
// Prioritized Experience Replay", arXiv 1803.00933, Algorithm 1): an
// epsilon-greedy policy over the actor's own copy of the Q network, with
// Ape-X's per-actor exploration rates eps_i = 0.4^(1 + 7·i/(N−1)); the
// n-step adder (NStep; terminations do not bootstrap, time-limit
// truncations do); local batches of 50 transitions whose initial
// priorities the actor computes with its own network; a parameter refresh
// from the learner's model.Store every 400 environment steps; episode
// statistics; and greedy evaluation (Evaluate).
//
// Continuous (NewContinuous) is the same actor for a continuous action
// space (a bounded envs.Box), for a TD3 or DDPG learner: a deterministic
// policy network with a Tanh output, a = clip(ScaleAction(π(s)) +
// N(0, (σ·half-range)²), low, high) with TD3's σ = 0.1 for every actor by
// default (ContinuousConfig.SigmaLast spreads it geometrically over the
// actors, Ape-X style), uniform actions before the first snapshot and for
// RandomSteps steps, actions stored as float32 in the buffer's ActionVec
// column exactly as played, and no initial priorities (a policy has no
// critic: the buffer gives new items its maximum). ScaleAction and
// UnscaleAction are the affine map between [−1, 1]^A and the box that the
// learner shares with it; Evaluate plays the policy without noise
// (EvaluateContinuous).
//
// Squashed (NewSquashed) is the actor of a SAC learner: a squashed-Gaussian
// policy network (2A linear outputs, the means and log stds), a =
// ScaleAction(tanh(μ(s) + σ(s)·z)), the policy's own noise as exploration,
// the same warm-up, storage and priorities as Continuous; EvaluateSquashed
// plays ScaleAction(tanh(μ(s))).
//
// The package starts no goroutines, reads no clock and uses no global
// random source: an Actor draws from its own PCG generator seeded from
// (Config.Seed, Config.ID), so a run is reproducible from its seed.
//
// # Usage
//
//	bcfg := buffer.Config{Capacity: 1 << 20, ObsDim: 4, NumActions: 2, Episode: true}
//	net, _ := model.NewNet(netCfg, nil) // the actor's copy; parameters come from store
//	a, err := actor.New(actor.Config{ID: i, NumActors: n, Seed: seed,
//		Columns: actor.ColumnsOf(bcfg)}, env, net, store, per)
//	...
//	for ctx.Err() == nil { // the runtime's actor goroutine (a runtime.Source)
//		t := <free batch, emptied>
//		if err := a.Fill(ctx, t); err != nil { ... }
//		<send t to the inserter>
//	}
//
// For continuous actions the buffer has Action: buffer.Continuous and
// ActionDim: the box's dimension, and the actor is made with
// actor.NewContinuous(actor.ContinuousConfig{...}, env, policyNet, store);
// the rest is the same.
//
// The embedder's duties:
//
//  1. One Actor per goroutine, each with its own Env and its own Net (an
//     Actor, its Env and its Net are not safe for concurrent use). Only
//     Stats may be called from other goroutines; a Fill or Update that
//     overlaps another on the same actor is refused with ErrBusy.
//  2. Give every actor of a run the same NumActors and Seed and a distinct
//     ID in [0, NumActors): the ID picks the exploration rate (eps_i, or a
//     continuous actor's σ_i when SigmaLast spreads it), the generator's
//     stream and the high 32 bits of its EpisodeIDs.
//  3. Set Config.Columns to ColumnsOf(the buffer's Config): the buffer
//     rejects a column it does not store, and leaves one it stores but is
//     not given at zero.
//  4. Publish parameters to the Store (model.Store.Publish with a new
//     version). Until the first snapshot an actor explores uniformly and
//     its batches carry no priorities (the buffer gives them its maximum).
//  5. Treat a batch that Fill returned because ctx ended as partial: it
//     holds the transitions completed so far, without priorities, and the
//     runtime pipeline discards it.
//  6. Evaluate with a separate Env and Net (Evaluate copies the Store's
//     snapshot into the Net it is given: the Q network's, or for a Box the
//     policy's).
//
// # Costs
//
// Measured by bench_test.go on the 2-core development machine (go test -run
// '^$' -bench . ./actor), CartPole-v1 with a 4→64→64→2 ReLU network, PER
// priorities, local batch 50: about 0.72M environment steps/s for actor 0 of
// a run (eps 0.4), 0.6M fully greedy (one gemv forward per step) and 0.95M
// exploring uniformly. The priority pass (one batched forward over the 50
// first states, plus a few bootstrap states) costs about 0.8 µs per step,
// the greedy forward about 0.6 µs. One allocation per step: the
// environment's observation.
//
// A continuous actor on Pendulum-v1 with a 3→64→64→1 Tanh policy
// (BenchmarkContinuousPendulum, same machine, busier) takes about 0.4–0.7M
// steps/s with noise (one gemv forward and one normal draw per step) and
// about 3M during its uniform warm-up; the actor allocates nothing per
// step (the 3 allocations are Pendulum's).
package actor
