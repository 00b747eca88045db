// Package learner holds apex's learners: the update rules that replay
// sampled batches, train a network, write priorities back through the
// sampler stage and publish parameters to the actors. It holds four:
//
//   - DQN, the Ape-X learner for discrete actions: Double DQN with n-step
//     targets and a target network (Horgan et al. 2018, arXiv:1803.00933;
//     van Hasselt et al. 2016, arXiv:1509.06461).
//   - TD3 for continuous actions (Fujimoto et al. 2018, arXiv:1802.09477):
//     an actor μ(s) ∈ [−1, 1]^A scaled by the environment's MaxAction, twin
//     critics Q(s, a) whose minimum makes the target (clipped double Q),
//     clipped Gaussian noise on the target action (target policy
//     smoothing), and actor and Polyak target updates every PolicyDelay
//     critic updates. The priority of a replayed item is the larger of the
//     two critics' |δ|, as LAP and PAL prescribe (Fujimoto et al. 2020,
//     arXiv:2007.06049): "uniform" with the MSE loss is TD3, "lap" and
//     "pal" are TD3+LAP and TD3+PAL. It publishes the actor network only
//     (the critics stay with the learner); exploration noise (Gaussian, σ = 0.1·MaxAction
//     in the paper) is theirs. An embedder builds it like a DQN (below),
//     with NewTD3(cfg, actor, critic, buf, method, store), a buffer of
//     continuous actions and TD3Config.MaxAction set.
//   - SAC for continuous actions, with automatic entropy tuning (Haarnoja
//     et al. 2018, arXiv:1812.05905): a tanh-squashed Gaussian policy
//     (SACPolicyConfig: means and clamped log stds), twin critics and
//     their Polyak targets, soft targets with the policy's log-probability,
//     a reparameterised policy loss through the smaller critic, and the
//     temperature α learned toward the target entropy −A. It writes back
//     max(|δ1|, |δ2|) as TD3 does and takes every method but the ReF-ER
//     ones; its actors (actor.Squashed) explore with the policy's own
//     noise. NewSAC(cfg, policy, critic, buf, method, store).
//   - VRACER for continuous actions with Remember and Forget Experience
//     Replay (Novati & Koumoutsakos 2019, arXiv:1807.05827): one network
//     gives V(s) and a Gaussian policy's mean, with a learned
//     state-independent std; Retrace targets over the stored episodes; the
//     off-policy policy and value gradients skipped on far-policy steps
//     and a KL penalty toward the stored behaviours, weighted by ReF-ER's
//     controller (methods refer, refer-1, refer-2, er).
//   - REFERController, ReF-ER's learner-side state for V-RACER and TD3
//     under a ReF-ER method: each stored step's rho, V, KL and Retrace
//     target, the far-policy counter, beta, c_max and the learning-rate
//     scale. The learner builds it over the method's Episodes (the REFER
//     stage's sampler.EpisodeSource) and it follows the stage's episodes
//     as their observer.
//
// All take a sampler.Method: the selection stage, its per-item weights,
// its batch normaliser and its loss, which a prioritized replay paper
// derives together.
//
// DQN, TD3 and SAC share one replay step (replay.go): sample through the
// stage, take the Weighter's weights at step−1, multiply them by the
// Normalizer's scale of the batch's |δ|, learn, write |δ| (or Q and the
// target, for a feature-scoring stage) back, and count the step alike
// (write-backs applied and stale, mean |δ| and Q, sampled moments,
// timing), only once the whole step succeeded. Each learner supplies only
// its targets, losses and updates between those phases. VRACER shares the
// sampling, the phase timing and the step count; its weights and feedback
// go through ReF-ER's controller (per-row weights, refresh) instead.
//
// A learner is a pure state machine driven by its caller, like raft's
// RawNode: it starts no goroutines and draws from its own seeded random
// stream; it reads the monotonic clock only to measure its Timing (the
// time in steps, sampling and write-back), which never affects what it
// computes. The runtime calls Step from its learner goroutine (DQN, TD3,
// SAC and VRACER implement runtime.Stepper); everything else (pacing against
// inserts, stopping, checkpoint files) is the runtime's. A DQN, TD3 or SAC
// step can also be data parallel (SetWorkers): its batch split into row shards
// run on a Workers capability the caller provides (the runtime's
// WorkerPool, or SerialWorkers without goroutines), one reduction of the
// shards' gradients in shard order, one optimizer step; the same number of
// workers gives the same bits however the shards are scheduled.
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
//     and the optimizer (float32, model.AdamConfig.Float32, exactly when
//     the network has model.Config.Float32; every learner's optimizers
//     follow their networks' precision so), allocates every buffer it
//     needs, and publishes version 0 so actors can act before the first
//     update. The actors
//     take method.Selector for their insert priorities.
//  4. Insert transitions as actors produce them: Reward the n-step return,
//     Discount γ^m (0 at a termination), as actor.NStep writes them.
//  5. Call Step from one goroutine once the buffer holds at least Batch
//     items (the runtime's rate limiter waits for its minimum size); a
//     Step that overlaps another is refused with ErrBusy. A non-nil error
//     stops the run: a *model.NonFiniteError (errors.Is
//     model.ErrNonFinite) names the step and the NaN or infinite value.
//  6. Read Stats from any goroutine for progress and metrics.
//  7. Checkpoint with Save (together with buffer.Buffer.Save, with the
//     learner and the inserters stopped) and resume with Load on a learner
//     built the same way; the networks' precision may differ (a float64
//     learner's checkpoint loads into a float32 one and back: the float64
//     parameters carry over, and each optimizer's moments are rounded to
//     float32 or widened, model.Adam.SetFloat32).
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
//
// A TD3 Step on Pendulum-sized networks (actor 3→64→64→1, critics
// 4→64→64→1, 2^16 items) took about 1.4 ms at Batch 64 and 4.5 ms at the
// default Batch 256 (about 220 steps/s) on the same machine under load from
// other work, the same with LAP's write-back as with uniform replay; no
// allocation except the published snapshots. Five forward passes and two
// backward passes make every step, and every second step adds the actor's
// forward and backward through the first critic.
package learner
