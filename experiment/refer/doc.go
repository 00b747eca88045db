// Package refer runs the experiments of Remember and Forget Experience
// Replay (ReF-ER) with V-RACER (Novati & Koumoutsakos, ICML 2019, arXiv
// 1807.05827; issue 6, refer.md §6), at the CPU scale refer.md calibrated:
//
//  1. Pendulum-v1 with V-RACER under full ReF-ER ("refer"), Rule 1 alone
//     ("refer-1"), Rule 2 alone ("refer-2") and plain experience replay
//     ("er"), several seeds, 1e5 learner steps each (one learner step per
//     environment step), through experiment/control's deterministic runs.
//     Per method: the return curve, the far-policy fraction of the stored
//     steps and the mean KL(μ||π) of the sampled steps over time, a table,
//     plots (DefaultPendulumConfig, RunPendulum, Summarise,
//     WritePendulumTable, SaveFarPlot, SaveKLPlot) and the acceptance
//     checks (PendulumChecks).
//  2. The one-dimensional linear-quadratic regulator LQR-v0: V-RACER with
//     full ReF-ER, then the slope of the learned policy mean u(x) fitted
//     by least squares over x in [−X0, X0] and compared with the Riccati
//     gain −K* (DefaultLQRConfig, RunLQR, FitSlope, WriteLQRTable,
//     SaveLQRPlot).
//  3. ReF-ER around TD3 (the paper's DDPG arm): TD3 on Pendulum-v1 plain
//     ("uniform"), over whole episodes with the fixed Gaussian behaviour
//     ("er") and with full ReF-ER ("refer"); the return, far fraction and
//     KL as in part 1 (DefaultTD3Config, RunTD3, TD3Checks).
//
// # Usage
//
// `apex experiment refer` runs the three parts and writes refer.json and
// the plots. An embedder:
//
//  1. takes DefaultPendulumConfig, DefaultLQRConfig and DefaultTD3Config
//     and changes the fields it wants (Base.Steps, Seeds, Workers;
//     LQRConfig.Steps);
//  2. calls RunPendulum, RunLQR and RunTD3 with a context (cancelling it stops
//     the runs; every goroutine has ended when they return);
//  3. writes the tables and plots, and reads the Checks of the results
//     (a failed check is the experiment's failure, not an error).
//
// Every run is deterministic: a seed gives the same run, bit for bit.
package refer
