// Package ter runs the experiments of Topological Experience Replay (Hong
// et al., ICLR 2022, arXiv 2203.15845): the NChain comparison of the
// paper's Figure 2 (the part 1), DDQN on the symbolic key-door
// grid through the runtime (part 2, keydoor.go: DefaultKeyDoorConfig for
// experiment/control, with linear Q on tabular features) and the cost of
// building one batch, the paper's Table B.1 (part 3). Parts 1 and 3 go
// through apex's real replay path: an apex buffer.Buffer with state-hash
// columns and the sampler package's stages (sampler.TER, sampler.Uniform,
// sampler.PER), plus two baselines defined here over the same buffer, EBU
// (episodic backward replay) and GreedyPER (the tabular script's PER).
//
// The NChain part is pure: no goroutines, no clock, no global random
// state; every random choice comes from generators seeded from
// NChainConfig.Seed, so a config always gives the same result. The cost
// part reads the clock in one function (elapsed); everything else about it
// is deterministic too.
//
// # NChain setting
//
// envs.NChain (App. D.1 and the authors' tabular script nchain.py): states
// s_1..s_N (0-based indices k = 0..N-1, the environment's StateHash),
// forward (action 0) moves s_i to s_{i+1}, backward (action 1) to
// s_{i-1} and is a no-op at s_1; reward +1 on s_{N-1} -> s_N, which
// terminates; episodes start at s_1 and are truncated (not terminated)
// after 2N² = 800 steps. N = 20.
//
//   - Data (CollectDataset): 1000 uniformly random steps, restarting at s_1
//     after each episode, redrawn until one episode succeeds. Stored once
//     per method in a fresh buffer (capacity 1000, the default 16 stripes,
//     one insert) with FlagTerminal (discount 0) on the terminations and
//     FlagTruncated on the time-outs.
//   - Learner: tabular Q, Q(s, a) += lr·w·δ with δ = r + γ·max_a' Q(s', a')
//     − Q(s, a) (no bootstrap after a termination; a truncation
//     bootstraps), lr 0.98, γ 0.99, Q initialised U[0, 0.1) per dataset
//     (the same table for every method), one transition per update, 100
//     updates; w is the stage's weight (1 for all defaults).
//   - Metric: after each update one greedy episode from s_1, return
//     1 − len/800 (0 if it does not reach s_N). The optimum, walking
//     straight forward, is 1 − 19/800 = 0.97625. Reported per method: the
//     first update after which the greedy return is optimal (censored at
//     100), the fractions of datasets solved within 40 and 100 updates,
//     nearest-rank median and p10..p90, and the mean |Q − Q*| after 100
//     updates.
//
// # Q* of the chain
//
// s_N is terminal, so nothing bootstraps from it (its row of Q is never
// read). From k = N−2 forward earns 1 and ends: Q*(N−2, fwd) = 1. Walking
// forward from k reaches the reward after N−1−k steps, and nothing is
// earned before, so the optimal value is V*(k) = γ^(N−2−k) for k <= N−2,
// and for k < N−2
//
//	Q*(k, fwd)  = 0 + γ·V*(k+1)         = γ^(N−2−k),
//	Q*(k, back) = 0 + γ·V*(max(k−1, 0)) = γ·Q*(max(k−1, 0), fwd),
//
// with 0-based k, the max for the no-op at s_1. Forward is optimal
// everywhere: Q*(k, back) = γ^(N−k) < γ^(N−2−k) for k >= 1, and
// Q*(0, back) = γ^(N−1) < γ^(N−2). The time limit is not part of the state
// (a truncation is not terminal), so Q* is that of the untruncated MDP,
// the fixed point the learner's bootstrapped update targets. QStar
// computes it by this recursion in float64 (γ^(N−2−k) as repeated
// products), which is what updates with lr = 1 from Q = 0 compute exactly;
// the tests check it against the closed form and against envs.NChain's own
// transitions. |Q − Q*| is averaged over the 2(N−1) pairs of non-terminal
// states.
//
// # Methods
//
//   - ter: sampler.TER over the buffer, B = 1, Eta 0 (every row from the
//     sweep; the stage's FromSweep confirms it), K = 8 roots (the chain has
//     one terminal vertex), P_max = 3 (a chain vertex has at most two
//     predecessor edges, so it does not bind), EdgeAction true: edges keyed
//     by (predecessor, action) as the tabular script keys them (in a
//     deterministic chain the same edges as state pairs).
//   - uniform: sampler.Uniform.
//   - per: sampler.PER, alpha 0.6, eps 1e-6, new items at the maximum
//     priority, beta 0 (weights 1): the script's update has no importance
//     weights.
//   - per-greedy: GreedyPER, the script's PER ("tabular greedy
//     max-priority" in the design notes' re-simulation).
//   - ebu: EBU, plain backward replay of the successful episodes.
//
// ExactSweep is the experiment's self-check (design notes §6.1): with
// lr = 1 and Q = 0, the first sweep of the real sampler.TER leaves
// Q == Q* bit for bit on every (state, action) pair of the dataset (all of
// them are backward-reachable from s_N: the successful episode crosses
// every forward edge). RunNChain runs it on every dataset.
//
// # Usage
//
//	res, err := ter.RunNChain(ter.DefaultNChainConfig()) // 100 datasets
//	...
//	ter.WriteNChainTable(os.Stdout, res) // includes res.AcceptanceChecks()
//	ter.SaveNChainPlot(res, "nchain.png")
//
//	cost, err := ter.RunCost(ter.DefaultCostConfig())
//	...
//	ter.WriteCostTable(os.Stdout, cost)
//
// Both results marshal to JSON. On a 2-core machine the default NChain
// run takes about 0.3 s, the default cost run about 1.5 s.
//
// # Choices where the notes are silent
//
//  1. Greedy ties go to forward (action 0), as numpy's argmax does in the
//     script; they only arise in the lr = 1 check, which does not evaluate.
//  2. A greedy episode that revisits a state loops until the time limit
//     (deterministic policy and chain), so it is cut there with return 0;
//     the metric is unchanged and evaluation costs O(N).
//  3. Truncated transitions bootstrap. The script passes gym's done flag
//     to its update, so its time-out transitions do not; TER's terminal
//     set excludes them in both.
//  4. The script's PER and sampler.PER are both reported: greedy
//     max-priority is what the notes' re-simulation ran, sampler.PER is
//     the stage apex ships. Both fail within 100 updates.
//  5. EBU replays only episodes that ended in a termination (the script
//     also keeps time-outs and picks a random ended episode each time):
//     the latest first, then the next earlier, restarting at the latest
//     after the earliest. Its median is 91 updates here against the notes'
//     re-simulated 102.
//  6. sampler.TER chooses an expanded vertex's predecessor edges in random
//     order (the script in a fixed one, forward first), so the last
//     forward edge is replayed at update 35 or 36, not always 35: TER's
//     p90 is 36, the notes' maximum 35.
//  7. First-optimal updates are 1-based (the greedy return before any
//     update is not counted); quantiles are nearest-rank, and a value of
//     Updates+1 means "not within Updates" (printed ">100").
//  8. Each method gets its own buffer and sampling stream, seeded from
//     (Seed, dataset, method name), so one method's priorities never steer
//     another and adding a method changes no other column.
//
// # Batch cost (Table B.1)
//
// RunCost fills a buffer of 100k with uniformly random steps of
// KeyDoor-Random (the symbolic key-door grid with a random layout per
// episode: about 4000 distinct states, a few dozen terminal ones), as the
// key-door runs' buffer (design notes §6.3: C = 100k) would hold, in actor
// batches of 64 with state hashes and episode columns. For each stage and
// batch size (32 and 256) it then times 2000 batches of Sample plus
// Weights (the learner excluded), inserting 4 new transitions before each
// (replay ratio 0.25, not timed; TER's and EBU's Sample index them, which
// is) and writing uniformly random |δ| back after each (not timed). TER
// runs the notes' key-door setting (Eta 0.5, K = 8, P_max = 3, edges by
// state pair). The first batch and the stage's construction (where TER and
// EBU index the 100k stored items) are reported apart. The times are wall
// times on whatever machine runs it: the tests check only their structure.
package ter
