// Package ners runs the small experiments of Neural Experience Replay
// Sampling (Oh et al., ICLR 2021, arXiv 2007.07358; issue 7, per-ners.md
// §4), at a 2-core CPU scale:
//
//  1. The statistics of the sampled batches (the paper's Table 3): TD3 on
//     SparsePendulum-v1 (Pendulum*, reward 1 only after 20 consecutive
//     steps within ±π/3 of upright, horizon 200) under uniform, PER and
//     NERS for 10k steps; per method the mean and standard deviation of
//     |δ| and of Q(s, a) over every row the learner sampled, and the
//     learner's time per step (DefaultStatsConfig, RunStats,
//     WriteStatsTable).
//  2. Final returns of uniform, PER and NERS with TD3 on Pendulum-v1 and
//     with Double DQN on CartPole-v1, 5 seeds each, mean ± 95% CI
//     (DefaultPendulumConfig, DefaultCartPoleConfig, through
//     experiment/control).
//
// Every run is deterministic (one actor in lockstep with the learner): a
// seed gives the same run, bit for bit. The paper reports no error bars;
// these tables are what they are, whichever method they favour.
//
// `apex experiment ners` runs all parts; an embedder takes the Default
// configurations, changes the fields it wants and calls RunStats or
// control.Run.
package ners
