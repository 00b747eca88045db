package main

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/apexrl/apex/experiment/control"
	"github.com/apexrl/apex/experiment/lappal"
)

// lapPALParts are the parts of `apex experiment lap-pal`, in run order.
var lapPALParts = []string{"regression", "pendulum", "cartpole"}

// runLAPPAL runs the LAP/PAL experiments (Fujimoto et al. 2020): the
// regression's fixed points, TD3 on Pendulum-v1 and Double DQN on
// CartPole-v1 under several replay methods. It prints each part's table
// and writes lap-pal.json and one plot per control part to -out. Exit 1 if
// an acceptance check fails.
func runLAPPAL(args []string, stdout, stderr io.Writer) int {
	c := newPartsCmd("lap-pal", lapPALParts, 2, "out/lap-pal",
		"LAP and PAL (Fujimoto, Meger & Precup 2020): (1) a linear regression trained\n"+
			"through each replay method's stage to its predicted fixed point; (2) TD3 on\n"+
			"Pendulum-v1 under uniform, per, lap and pal; (3) Double DQN on CartPole-v1\n"+
			"under uniform, per and lap. Control runs are deterministic (one actor in\n"+
			"lockstep with the learner). Prints the tables and the acceptance checks;\n"+
			"writes lap-pal.json, pendulum.png and cartpole.png.", stdout, stderr)
	seeds := c.fs.Int("seeds", len(lappal.DefaultPendulumConfig().Seeds), "seeds per method in the control parts, from -seed on (>= 2); -seed alone seeds the regression")
	pendSteps := c.fs.Int64("pendulum-steps", lappal.DefaultPendulumConfig().Base.Steps, "learner (= environment) steps per Pendulum run")
	c.offerFloat32("pendulum", "cartpole")
	cartSteps := c.fs.Int64("cartpole-steps", lappal.DefaultCartPoleConfig().Base.Steps, "learner (= environment) steps per CartPole run")
	ctx, done, code, ok := c.start(args, func() string {
		switch {
		case *seeds < 2:
			return fmt.Sprintf("-seeds must be >= 2, got %d", *seeds)
		case *pendSteps <= 0:
			return fmt.Sprintf("-pendulum-steps must be > 0, got %d", *pendSteps)
		case *cartSteps <= 0:
			return fmt.Sprintf("-cartpole-steps must be > 0, got %d", *cartSteps)
		}
		return c.seedsFit("-seeds", *seeds)
	})
	if !ok {
		return code
	}
	defer done()
	fail, out, workers := c.fail, c.out, c.workers
	report := map[string]any{}
	failed := false
	// The regression takes seconds and does not watch ctx: a stop during
	// it takes effect when it ends.
	if err := c.part("regression", 0, func() error {
		start := time.Now()
		cfg := lappal.DefaultRegressionConfig()
		cfg.Seed = *c.seed
		res, err := lappal.RunRegression(cfg)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "== (1) regression: each method's fixed point")
		if err := lappal.WriteRegressionTable(stdout, res); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "(%.1fs)\n\n", time.Since(start).Seconds())
		failed = failed || !res.AllWithin()
		report["regression"] = res
		return nil
	}); err != nil {
		return fail(err)
	}
	for _, part := range []struct {
		name  string
		cfg   control.Config
		steps int64
	}{{"pendulum", lappal.DefaultPendulumConfig(), *pendSteps}, {"cartpole", lappal.DefaultCartPoleConfig(), *cartSteps}} {
		cfg := part.cfg
		cfg.Base.Steps, cfg.Workers, cfg.Seeds = part.steps, *workers, c.seeds(*seeds)
		cfg.Base.Float32 = c.float32()
		if err := c.part(part.name, len(cfg.Samplers)*len(cfg.Seeds), func() error {
			res, err := c.runControlPart(ctx, part.name, cfg, filepath.Join(*out, part.name+".png"))
			if err != nil {
				return err
			}
			for _, c := range res.Checks {
				failed = failed || !c.OK
			}
			report[part.name] = res
			if part.name == "pendulum" {
				// Issue 14: how many runs end below -250, per method and LAP or
				// PAL pooled against uniform or PER pooled.
				rows, ok, err := lappal.PendulumFailures(cfg, res.Runs)
				if err != nil {
					return err
				}
				if !ok {
					return nil
				}
				if err := lappal.WriteFailureTable(stdout, rows, lappal.PendulumFailureFloor); err != nil {
					return err
				}
				fmt.Fprintln(stdout)
				report["pendulum_failures"] = rows
			}
			return nil
		}); err != nil {
			return fail(err)
		}
	}
	return c.finish("lap-pal.json", report, failed)
}
