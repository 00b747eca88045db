// Package cliffwalk reproduces the Blind Cliffwalk of Prioritized
// Experience Replay (Schaul et al. 2016, arXiv 1511.05952, Figure 1 and
// Appendix B.1): how many replayed updates tabular Q-learning needs to learn
// Q* when the one rewarding transition is buried in a replay memory of
// 2^(n+1)-2, under uniform, prioritized and oracle replay.
//
// The package is pure: no goroutines, no clock, no global random state.
// Every random choice comes from generators seeded from Config.Seed, so a
// Config always gives the same Result.
//
// # Setting
//
//   - Env: n states; at s_i the "right" action (id i mod 2) moves on, the
//     other ends the episode with reward 0; the last right action ends it
//     with reward 1. gamma = 1 - 1/n, so Q*(s_i, right) = gamma^(n-1-i).
//   - Memory: the transitions of all 2^n action sequences, duplicates kept
//     (2^(n+1)-2 items, 2n distinct); the rewarding one occurs once.
//   - Learning: Q(s,a) += eta·w·delta with eta = 1/4, one transition per
//     update, from Q ~ N(0, 0.1²) (the paper's theta ~ N(0, 0.1), read as
//     sd 0.1); a run stops when MSE(Q, Q*) over the 2n pairs is below 1e-3
//     and reports the number of updates (capped by Config.MaxUpdates).
//   - Agents (DefaultAgents): Uniform, Proportional and RankBased go through
//     apex's real replay path, a buffer.Buffer plus a sampler.Selector, with
//     |delta| written back after each update and new items at the maximum
//     priority; Oracle picks the update that most reduces the loss.
//
// # Usage
//
//	cfg := cliffwalk.DefaultConfig() // n = 2..12, 10 seeds
//	res, err := cliffwalk.Run(ctx, cfg) // ctx's end stops it between runs
//	...
//	cliffwalk.WriteTable(os.Stdout, res)
//	cliffwalk.SavePlot(res, "cliffwalk.png")
//
// The command `apex experiment cliffwalk` does this; the default sweep takes
// about 6 s on a 2-core machine.
//
// # Choices where the paper is silent
//
//  1. alpha and beta: PER's Atari values (0.6 and 0.4→1 proportional, 0.7
//     and 0.5→1 rank); beta anneals over Config.BetaSteps, not the cap.
//  2. The headline prop and rank columns replay without importance weights,
//     as the paper's Cliffwalk does (its IS correction is introduced after
//     it, in §3.4). The +IS columns add PER's weights, normalised by the
//     buffer's largest weight (the project's default): they shrink exactly
//     the steps on high-priority transitions, and proportional+IS only
//     overtakes uniform from n = 11.
//  3. Rank selection draws one row per equal-mass segment and replays one
//     row at random (see RankBased); one row would be one segment, uniform.
//  4. The oracle costs O(N) per update: one update changes one table entry,
//     so each candidate's effect on the loss is O(1). Config.OracleMaxN
//     bounds it all the same.
package cliffwalk
