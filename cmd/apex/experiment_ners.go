package main

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/apexrl/apex/experiment/control"
	"github.com/apexrl/apex/experiment/ners"
)

// nersParts are the parts of `apex experiment ners`, in run order.
var nersParts = []string{"stats", "pendulum", "cartpole"}

// runNERS runs the NERS experiments (Oh et al. 2021): the sampled-batch
// statistics of TD3 on SparsePendulum-v1 under uniform, PER and NERS, and
// the final returns of TD3 on Pendulum-v1 and Double DQN on CartPole-v1
// under the same three. It prints the tables and writes ners.json and the
// plots to -out. The parts have no pass/fail acceptance: it exits 0 when
// every run completed.
func runNERS(args []string, stdout, stderr io.Writer) int {
	st, pend, cart := ners.DefaultStatsConfig(), ners.DefaultPendulumConfig(), ners.DefaultCartPoleConfig()
	c := newPartsCmd("ners", nersParts, 2, "out/ners",
		"NERS (Oh et al. 2021): (1) TD3 on SparsePendulum-v1 (the paper's Pendulum*)\n"+
			"under uniform, per and ners: mean and sd of |TD| and Q over the sampled\n"+
			"batches (the paper's Table 3) and the learner's time per step; (2) final\n"+
			"returns, mean ± 95% CI, of TD3 on Pendulum-v1 and Double DQN on CartPole-v1\n"+
			"under the same three. Runs are deterministic (one actor in lockstep with the\n"+
			"learner). Writes ners.json, sparse-pendulum.png, pendulum.png, cartpole.png.", stdout, stderr)
	statSeeds := c.fs.Int("stats-seeds", len(st.Seeds), "seeds per method in the statistics part, from -seed on (>= 2)")
	seeds := c.fs.Int("seeds", len(pend.Seeds), "seeds per method in the return parts, from -seed on (>= 2)")
	statSteps := c.fs.Int64("stats-steps", st.Base.Steps, "learner steps per SparsePendulum run")
	pendSteps := c.fs.Int64("pendulum-steps", pend.Base.Steps, "learner steps per Pendulum run")
	cartSteps := c.fs.Int64("cartpole-steps", cart.Base.Steps, "learner steps per CartPole run")
	ctx, done, code, ok := c.start(args, func() string {
		for _, f := range []struct {
			name string
			v    int64
			min  int64
		}{{"-stats-seeds", int64(*statSeeds), 2}, {"-seeds", int64(*seeds), 2}, {"-stats-steps", *statSteps, 1},
			{"-pendulum-steps", *pendSteps, 1}, {"-cartpole-steps", *cartSteps, 1}} {
			if f.v < f.min {
				return fmt.Sprintf("%s must be >= %d, got %d", f.name, f.min, f.v)
			}
		}
		if msg := c.seedsFit("-stats-seeds", *statSeeds); msg != "" {
			return msg
		}
		return c.seedsFit("-seeds", *seeds)
	})
	if !ok {
		return code
	}
	defer done()
	fail, out, workers := c.fail, c.out, c.workers
	report := map[string]any{}
	st.Base.Steps, st.Seeds = *statSteps, c.seeds(*statSeeds)
	pend.Base.Steps, pend.Seeds = *pendSteps, c.seeds(*seeds)
	cart.Base.Steps, cart.Seeds = *cartSteps, c.seeds(*seeds)
	for _, part := range []struct {
		name, title, png string
		cfg              control.Config
	}{
		{"stats", "(1) stats", "sparse-pendulum.png", st},
		{"pendulum", "(2) pendulum", "pendulum.png", pend},
		{"cartpole", "(2) cartpole", "cartpole.png", cart},
	} {
		cfg := part.cfg
		cfg.Workers = *workers
		if err := c.part(part.name, len(cfg.Samplers)*len(cfg.Seeds), func() error {
			res, err := c.runControlPart(ctx, part.title, cfg, filepath.Join(*out, part.png))
			if err != nil {
				return err
			}
			sr := &ners.StatsResult{Control: res, Stats: ners.Summarise(res)}
			if err := ners.WriteStatsTable(stdout, sr); err != nil {
				return err
			}
			fmt.Fprintln(stdout)
			report[part.name] = sr
			return nil
		}); err != nil {
			return fail(err)
		}
	}
	report["seconds"] = time.Since(c.begin).Seconds()
	return c.finish("ners.json", report, false)
}
