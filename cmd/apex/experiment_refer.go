package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/apexrl/apex/experiment/control"
	"github.com/apexrl/apex/experiment/refer"
)

// referParts are the parts of `apex experiment refer`, in run order.
var referParts = []string{"pendulum", "lqr", "td3"}

// runREFER runs the ReF-ER experiments (Novati & Koumoutsakos 2019):
// V-RACER on Pendulum-v1 under full ReF-ER, ReF-ER-1, ReF-ER-2 and plain
// ER, V-RACER with full ReF-ER on the 1-D LQR against the Riccati gain,
// and TD3 on Pendulum-v1 plain, over whole episodes and with full ReF-ER. It prints each part's table and checks and writes refer.json and
// the plots to -out. Exit 1 if an acceptance check fails.
func runREFER(args []string, stdout, stderr io.Writer) int {
	pend, lqr, td3 := refer.DefaultPendulumConfig(), refer.DefaultLQRConfig(), refer.DefaultTD3Config()
	c := newPartsCmd("refer", referParts, pend.Workers, "out/refer",
		"ReF-ER and V-RACER (Novati & Koumoutsakos 2019): (1) V-RACER on Pendulum-v1\n"+
			"under full ReF-ER (refer), Rule 1 alone (refer-1), Rule 2 alone (refer-2) and\n"+
			"plain experience replay (er): returns, the far-policy fraction and the KL over\n"+
			"time; (2) V-RACER with full ReF-ER on the 1-D linear-quadratic regulator\n"+
			"LQR-v0: the learned policy mean's slope against the Riccati gain; (3) TD3 on\n"+
			"Pendulum-v1 plain (uniform), over whole episodes (er) and with full ReF-ER\n"+
			"(refer), the paper's DDPG arm. Runs are deterministic (one actor in lockstep\n"+
			"with the learner). Prints the tables and the acceptance checks; writes\n"+
			"refer.json, pendulum-{return,far,kl}.png, lqr.png and td3-{return,far,kl}.png.", stdout, stderr)
	seeds := c.fs.Int("seeds", len(pend.Seeds), "seeds per method on Pendulum, both learners, from -seed on (>= 2)")
	steps := c.fs.Int64("steps", pend.Base.Steps, "learner (= environment) steps per Pendulum run; A = 5/steps")
	lqrSeeds := c.fs.Int("lqr-seeds", len(lqr.Seeds), "seeds on the LQR, from -seed on (>= 1)")
	lqrSteps := c.fs.Int64("lqr-steps", lqr.Steps, "learner (= environment) steps per LQR run")
	c.offerFloat32("pendulum", "td3")
	td3Steps := c.fs.Int64("td3-steps", td3.Base.Steps, "learner (= environment) steps per TD3 run (A is the paper's 5e-7)")
	ctx, done, code, ok := c.start(args, func() string {
		for _, f := range []struct {
			name string
			v    int64
			min  int64
		}{{"-seeds", int64(*seeds), 2}, {"-lqr-seeds", int64(*lqrSeeds), 1}, {"-steps", *steps, 1},
			{"-lqr-steps", *lqrSteps, 1}, {"-td3-steps", *td3Steps, 1}} {
			if f.v < f.min {
				return fmt.Sprintf("%s must be >= %d, got %d", f.name, f.min, f.v)
			}
		}
		if msg := c.seedsFit("-seeds", *seeds); msg != "" {
			return msg
		}
		return c.seedsFit("-lqr-seeds", *lqrSeeds)
	})
	if !ok {
		return code
	}
	defer done()
	fail, out, workers := c.fail, c.out, c.workers
	report := map[string]any{}
	failed := false
	// controlPart runs a Pendulum part (V-RACER's methods or the TD3 arms)
	// and writes its table and its return, far-fraction and KL plots.
	controlPart := func(name, title, prefix string, cfg control.Config,
		run func(context.Context, control.Config, func(control.Trial)) (*refer.PendulumResult, error)) error {
		fmt.Fprintf(stdout, "== %s: %s on %s, %d methods x %d seeds, %d steps each\n", title, cfg.Base.Algo, cfg.Base.Env,
			len(cfg.Samplers), len(cfg.Seeds), cfg.Base.Steps)
		t0 := time.Now()
		res, err := run(ctx, cfg, func(r control.Trial) {
			last := r.Curve[len(r.Curve)-1]
			fmt.Fprintf(stdout, "  %-8s seed %d: final %.1f, far %.3f, KL %.3g (%.0fs)\n", r.Sampler, r.Seed, r.Final,
				last.FarFraction, last.MeanKL, r.Seconds)
			c.record(r.Sampler, r.Seed, r)
		})
		if err != nil {
			return err
		}
		if err := refer.WritePendulumTable(stdout, res); err != nil {
			return err
		}
		for _, p := range []struct {
			suffix string
			save   func(string) error
		}{
			{"-return.png", func(path string) error { return control.SavePlot(res.Control, path) }},
			{"-far.png", func(path string) error { return refer.SaveFarPlot(res, path) }},
			{"-kl.png", func(path string) error { return refer.SaveKLPlot(res, path) }},
		} {
			if err := p.save(filepath.Join(*out, prefix+p.suffix)); err != nil {
				return fmt.Errorf("plot %s%s: %w", prefix, p.suffix, err)
			}
		}
		fmt.Fprintf(stdout, "wrote %s-return.png, %s-far.png and %s-kl.png to %s (%.0fs)\n\n", prefix, prefix, prefix, *out, time.Since(t0).Seconds())
		failed = failed || !res.OK()
		report[name] = res
		return nil
	}
	pend.Base.Steps, pend.Workers, pend.Seeds = *steps, *workers, c.seeds(*seeds)
	pend.Base.Float32, td3.Base.Float32 = c.float32(), c.float32()
	if err := c.part("pendulum", len(pend.Samplers)*len(pend.Seeds), func() error {
		return controlPart("pendulum", "(1) pendulum", "pendulum", pend, refer.RunPendulum)
	}); err != nil {
		return fail(err)
	}
	lqr.Steps, lqr.Workers, lqr.Seeds = *lqrSteps, *workers, c.seeds(*lqrSeeds)
	if err := c.part("lqr", len(lqr.Seeds), func() error {
		fmt.Fprintf(stdout, "== (2) lqr: V-RACER + ReF-ER on LQR-v0, %d seeds, %d steps each\n", len(lqr.Seeds), lqr.Steps)
		t0 := time.Now()
		res, err := refer.RunLQR(ctx, lqr, func(r refer.LQRRun) {
			fmt.Fprintf(stdout, "  seed %d: slope %.4f, final %.3f (%.0fs)\n", r.Seed, r.Slope, r.Final, r.Seconds)
			c.record("", r.Seed, r)
		})
		if err != nil {
			return err
		}
		if err := refer.WriteLQRTable(stdout, res); err != nil {
			return err
		}
		png := filepath.Join(*out, "lqr.png")
		if err := refer.SaveLQRPlot(res, png); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		fmt.Fprintf(stdout, "wrote %s (%.0fs)\n\n", png, time.Since(t0).Seconds())
		failed = failed || !res.OK()
		report["lqr"] = res
		return nil
	}); err != nil {
		return fail(err)
	}
	td3.Base.Steps, td3.Workers, td3.Seeds = *td3Steps, *workers, c.seeds(*seeds)
	if err := c.part("td3", len(td3.Samplers)*len(td3.Seeds), func() error {
		return controlPart("td3", "(3) td3", "td3", td3, refer.RunTD3)
	}); err != nil {
		return fail(err)
	}
	report["seconds"] = time.Since(c.begin).Seconds()
	return c.finish("refer.json", report, failed)
}
