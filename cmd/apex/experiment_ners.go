package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apexrl/apex/experiment/control"
	"github.com/apexrl/apex/experiment/ners"
)

// nersParts are the parts of `apex experiment ners`, in run order.
var nersParts = []string{"stats", "pendulum", "cartpole", "table3-td3", "table3-sac"}

// runNERS runs the NERS experiments (Oh et al. 2021): the sampled-batch
// statistics of TD3 on SparsePendulum-v1 under uniform, PER and NERS, and
// the final returns of TD3 on Pendulum-v1 and Double DQN on CartPole-v1
// under the same three; and the paper's Table 3 as the paper sets it
// (ners.DefaultTable3Config) with TD3 and with SAC. It prints the tables
// and writes ners.json and the plots to -out. The parts have no pass/fail acceptance: it exits 0 when
// every run completed.
func runNERS(args []string, stdout, stderr io.Writer) int {
	st, pend, cart := ners.DefaultStatsConfig(), ners.DefaultPendulumConfig(), ners.DefaultCartPoleConfig()
	c := newPartsCmd("ners", nersParts, 2, "out/ners",
		"NERS (Oh et al. 2021): (1) TD3 on SparsePendulum-v1 (the paper's Pendulum*)\n"+
			"under uniform, per and ners: mean and sd of |TD| and Q over the sampled\n"+
			"batches (the paper's Table 3) and the learner's time per step; (2) final\n"+
			"returns, mean ± 95% CI, of TD3 on Pendulum-v1 and Double DQN on CartPole-v1\n"+
			"under the same three. Runs are deterministic (one actor in lockstep with the\n"+
			"learner). Writes ners.json, sparse-pendulum.png, pendulum.png, cartpole.png.\n"+
			"table3-td3 and table3-sac: Table 3 as the paper sets it (batch 128, one\n"+
			"evaluation rollout and one scorer update per 200 steps), statistics of the rows\n"+
			"sampled in the last 1000 learner steps and over the whole run, mean ± 95% CI\n"+
			"over seeds, under uniform, per, ners and ners with its scorer never trained.", stdout, stderr)
	statSeeds := c.fs.Int("stats-seeds", len(st.Seeds), "seeds per method in the statistics part, from -seed on (>= 2)")
	seeds := c.fs.Int("seeds", len(pend.Seeds), "seeds per method in the return parts, from -seed on (>= 2)")
	statSteps := c.fs.Int64("stats-steps", st.Base.Steps, "learner steps per SparsePendulum run")
	pendSteps := c.fs.Int64("pendulum-steps", pend.Base.Steps, "learner steps per Pendulum run")
	cartSteps := c.fs.Int64("cartpole-steps", cart.Base.Steps, "learner steps per CartPole run")
	t3 := ners.DefaultTable3Config("td3", "SparsePendulum-v1")
	t3Seeds := c.fs.Int("table3-seeds", len(t3.Seeds), "seeds per arm in the table3 parts, from -seed on (>= 2)")
	t3Env := c.fs.String("table3-env", t3.Base.Env, "environment of the table3 parts (the paper's Table 3 reports negative Q, so its runs had Pendulum's dense reward: try Pendulum-v1)")
	c.offerFloat32("stats", "pendulum", "cartpole", "table3-td3", "table3-sac")
	t3Steps := c.fs.Int64("table3-steps", t3.Base.Steps, "learner steps per run of the table3 parts (> 200; the window is the last 1000, or the last 200 of a shorter run)")
	t3Arms := c.fs.String("table3-arms", "uniform,per,ners,ners-frozen", "arms of the table3 parts: uniform, per, ners, ners-frozen")
	ctx, done, code, ok := c.start(args, func() string {
		for _, f := range []struct {
			name string
			v    int64
			min  int64
		}{{"-stats-seeds", int64(*statSeeds), 2}, {"-seeds", int64(*seeds), 2}, {"-stats-steps", *statSteps, 1},
			{"-pendulum-steps", *pendSteps, 1}, {"-cartpole-steps", *cartSteps, 1}, {"-table3-seeds", int64(*t3Seeds), 2},
			{"-table3-steps", *t3Steps, 201}} {
			if f.v < f.min {
				return fmt.Sprintf("%s must be >= %d, got %d", f.name, f.min, f.v)
			}
		}
		if msg := c.seedsFit("-stats-seeds", *statSeeds); msg != "" {
			return msg
		}
		if msg := c.seedsFit("-table3-seeds", *t3Seeds); msg != "" {
			return msg
		}
		if _, msg := table3Arms(*t3Arms); msg != "" {
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
	st.Base.Float32, pend.Base.Float32, cart.Base.Float32 = c.float32(), c.float32(), c.float32()
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
	arms, _ := table3Arms(*t3Arms)
	for _, algo := range []string{"td3", "sac"} {
		cfg := ners.DefaultTable3Config(algo, *t3Env)
		cfg.Arms, cfg.Seeds, cfg.Workers = arms, c.seeds(*t3Seeds), *workers
		// The window starts at the evaluation 1000 steps before the end,
		// or at the last one of a shorter run.
		every := cfg.Base.EvalEverySteps
		cfg.Base.Steps, cfg.WindowFrom = *t3Steps, (*t3Steps-1000)/every*every
		cfg.Base.Float32 = c.float32()
		if cfg.WindowFrom < every {
			cfg.WindowFrom = (*t3Steps - 1) / every * every
		}
		name := "table3-" + algo
		if err := c.part(name, len(cfg.Arms)*len(cfg.Seeds), func() error {
			fmt.Fprintf(stdout, "== %s: %s on %s, %d arms x %d seeds, %d steps each\n", name, algo, cfg.Base.Env, len(cfg.Arms), len(cfg.Seeds), cfg.Base.Steps)
			res, err := ners.RunTable3(ctx, cfg, func(r ners.Table3Run) {
				_, sdtd := r.Window.TD()
				_, sdq := r.Window.Q()
				fmt.Fprintf(stdout, "  %-11s seed %d: final %.1f, last 1000 steps sd(|TD|) %.4g sd(Q) %.4g (%.0fs, replay %.1f%% of learner time)\n",
					r.Arm, r.Seed, r.Final, sdtd, sdq, r.Seconds, 100*r.ReplayShare)
				c.record(r.Arm, r.Seed, r)
			})
			if err != nil {
				return err
			}
			if err := ners.WriteTable3(stdout, res); err != nil {
				return err
			}
			fmt.Fprintln(stdout)
			report[name] = res
			return nil
		}); err != nil {
			return fail(err)
		}
	}
	report["seconds"] = time.Since(c.begin).Seconds()
	return c.finish("ners.json", report, false)
}

// table3Arms returns the arms of ners.Table3Arms named in the
// comma-separated list, in its order, or a message naming an unknown one.
func table3Arms(list string) ([]ners.Arm, string) {
	var out []ners.Arm
	for name := range strings.SplitSeq(list, ",") {
		i := slices.IndexFunc(ners.Table3Arms(), func(a ners.Arm) bool { return a.Name == name })
		if i < 0 {
			return nil, fmt.Sprintf("-table3-arms: unknown arm %q (uniform, per, ners, ners-frozen)", name)
		}
		out = append(out, ners.Table3Arms()[i])
	}
	return out, ""
}
