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
	fs := flag.NewFlagSet("apex experiment ners", flag.ContinueOnError)
	fs.SetOutput(stderr)
	st, pend, cart := ners.DefaultStatsConfig(), ners.DefaultPendulumConfig(), ners.DefaultCartPoleConfig()
	parts := fs.String("parts", strings.Join(nersParts, ","), "comma-separated parts to run: "+strings.Join(nersParts, ", "))
	statSeeds := fs.Int("stats-seeds", len(st.Seeds), "seeds per method in the statistics part (>= 2)")
	seeds := fs.Int("seeds", len(pend.Seeds), "seeds per method in the return parts (>= 2)")
	workers := fs.Int("workers", 2, "runs trained at once")
	statSteps := fs.Int64("stats-steps", st.Base.Steps, "learner steps per SparsePendulum run")
	pendSteps := fs.Int64("pendulum-steps", pend.Base.Steps, "learner steps per Pendulum run")
	cartSteps := fs.Int64("cartpole-steps", cart.Base.Steps, "learner steps per CartPole run")
	out := fs.String("out", "out/ners", "directory for ners.json and the plots")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: apex experiment ners [flags]\n\n"+
			"NERS (Oh et al. 2021): (1) TD3 on SparsePendulum-v1 (the paper's Pendulum*)\n"+
			"under uniform, per and ners: mean and sd of |TD| and Q over the sampled\n"+
			"batches (the paper's Table 3) and the learner's time per step; (2) final\n"+
			"returns, mean ± 95%% CI, of TD3 on Pendulum-v1 and Double DQN on CartPole-v1\n"+
			"under the same three. Runs are deterministic (one actor in lockstep with the\n"+
			"learner). Writes ners.json, sparse-pendulum.png, pendulum.png, cartpole.png.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	want, ok := selectParts("apex experiment ners", *parts, nersParts, stderr)
	if !ok {
		return 2
	}
	if *statSeeds < 2 || *seeds < 2 || *workers < 1 || *statSteps <= 0 || *pendSteps <= 0 || *cartSteps <= 0 {
		fmt.Fprintf(stderr, "apex experiment ners: -seeds and -stats-seeds must be >= 2, -workers >= 1 and the step counts > 0\n")
		return 2
	}
	if !makeOut("apex experiment ners", *out, stderr) {
		return 1
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "apex experiment ners: %v\n", err)
		return 1
	}
	report := map[string]any{}
	start := time.Now()
	st.Base.Steps, st.Seeds = *statSteps, seedList(*statSeeds)
	pend.Base.Steps, pend.Seeds = *pendSteps, seedList(*seeds)
	cart.Base.Steps, cart.Seeds = *cartSteps, seedList(*seeds)
	for _, part := range []struct {
		name, title, png string
		cfg              control.Config
	}{
		{"stats", "(1) stats", "sparse-pendulum.png", st},
		{"pendulum", "(2) pendulum", "pendulum.png", pend},
		{"cartpole", "(2) cartpole", "cartpole.png", cart},
	} {
		if !slices.Contains(want, part.name) {
			continue
		}
		cfg := part.cfg
		cfg.Workers = *workers
		res, err := runControlPart(ctx, stdout, part.title, cfg, filepath.Join(*out, part.png))
		if err != nil {
			return fail(err)
		}
		sr := &ners.StatsResult{Control: res, Stats: ners.Summarise(res)}
		if err := ners.WriteStatsTable(stdout, sr); err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout)
		report[part.name] = sr
	}
	report["seconds"] = time.Since(start).Seconds()
	return finishReport("apex experiment ners", *out, "ners.json", report, start, false, stdout, stderr)
}
