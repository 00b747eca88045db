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
// The embedder's duties:
//
//  1. One Actor per goroutine, each with its own Env and its own Net (an
//     Actor, its Env and its Net are not safe for concurrent use). Only
//     Stats may be called from other goroutines.
//  2. Give every actor of a run the same NumActors and Seed and a distinct
//     ID in [0, NumActors): the ID picks the exploration rate, the
//     generator's stream and the high 32 bits of its EpisodeIDs.
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
//     snapshot into the Net it is given).
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
package actor
