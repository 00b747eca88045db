package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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
	fs := flag.NewFlagSet("apex experiment lap-pal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	parts := fs.String("parts", strings.Join(lapPALParts, ","), "comma-separated parts to run: "+strings.Join(lapPALParts, ", "))
	seeds := fs.Int("seeds", 5, "seeds per method in the control parts (>= 2)")
	workers := fs.Int("workers", 2, "control runs trained at once")
	pendSteps := fs.Int64("pendulum-steps", lappal.DefaultPendulumConfig().Base.Steps, "learner (= environment) steps per Pendulum run")
	cartSteps := fs.Int64("cartpole-steps", lappal.DefaultCartPoleConfig().Base.Steps, "learner (= environment) steps per CartPole run")
	out := fs.String("out", "out/lap-pal", "directory for lap-pal.json, pendulum.png and cartpole.png")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: apex experiment lap-pal [flags]\n\n"+
			"LAP and PAL (Fujimoto, Meger & Precup 2020): (1) a linear regression trained\n"+
			"through each replay method's stage to its predicted fixed point; (2) TD3 on\n"+
			"Pendulum-v1 under uniform, per, lap and pal; (3) Double DQN on CartPole-v1\n"+
			"under uniform, per and lap. Control runs are deterministic (one actor in\n"+
			"lockstep with the learner). Prints the tables and the acceptance checks.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	want, ok := selectParts("apex experiment lap-pal", *parts, lapPALParts, stderr)
	if !ok {
		return 2
	}
	if *seeds < 2 || *workers < 1 || *pendSteps <= 0 || *cartSteps <= 0 {
		fmt.Fprintf(stderr, "apex experiment lap-pal: -seeds must be >= 2, -workers >= 1 and the step counts > 0\n")
		return 2
	}
	if !makeOut("apex experiment lap-pal", *out, stderr) {
		return 1
	}
	begin := time.Now()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	report := map[string]any{}
	failed := false
	fail := func(err error) int {
		fmt.Fprintf(stderr, "apex experiment lap-pal: %v\n", err)
		return 1
	}
	if slices.Contains(want, "regression") {
		start := time.Now()
		res, err := lappal.RunRegression(lappal.DefaultRegressionConfig())
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, "== (1) regression: each method's fixed point")
		if err := lappal.WriteRegressionTable(stdout, res); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "(%.1fs)\n\n", time.Since(start).Seconds())
		failed = failed || !res.AllWithin()
		report["regression"] = res
	}
	for _, part := range []struct {
		name  string
		cfg   control.Config
		steps int64
	}{{"pendulum", lappal.DefaultPendulumConfig(), *pendSteps}, {"cartpole", lappal.DefaultCartPoleConfig(), *cartSteps}} {
		if !slices.Contains(want, part.name) {
			continue
		}
		cfg := part.cfg
		cfg.Base.Steps, cfg.Workers, cfg.Seeds = part.steps, *workers, seedList(*seeds)
		res, err := runControlPart(ctx, stdout, part.name, cfg, filepath.Join(*out, part.name+".png"))
		if err != nil {
			return fail(err)
		}
		for _, c := range res.Checks {
			failed = failed || !c.OK
		}
		report[part.name] = res
	}
	return finishReport("apex experiment lap-pal", *out, "lap-pal.json", report, begin, failed, stdout, stderr)
}
