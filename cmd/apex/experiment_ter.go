package main

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/apexrl/apex/experiment/control"
	"github.com/apexrl/apex/experiment/ter"
)

// terParts are the parts of `apex experiment ter`, in run order.
var terParts = []string{"nchain", "keydoor", "cost"}

// runTER runs the TER experiments (Hong et al. 2022): NChain's tabular
// backups to the optimal return, DDQN on the symbolic key-door grid, and
// the cost of building one batch per sampler. It prints each part's table
// and checks and writes ter.json and the plots to -out. Exit 1 if an
// acceptance check fails.
func runTER(args []string, stdout, stderr io.Writer) int {
	c := newPartsCmd("ter", terParts, 2, "out/ter",
		"Topological Experience Replay (Hong et al. 2022): (1) NChain, tabular Q over\n"+
			"1000 random steps, updates until the greedy policy is optimal for TER, uniform,\n"+
			"PER and episodic backward replay; (2) DDQN on the symbolic key-door grid,\n"+
			"environment steps to a normalised return of 0.9 for TER, PER and uniform;\n"+
			"(3) seconds to build one batch per sampler (the paper's Table B.1). Writes\n"+
			"ter.json, nchain.png and keydoor.png.", stdout, stderr)
	datasets := c.fs.Int("datasets", ter.DefaultNChainConfig().Datasets, "NChain datasets (>= 1)")
	seeds := c.fs.Int("seeds", len(defaultKeyDoor().Seeds), "seeds per method in the key-door part (>= 2)")
	ctx, cancel, code, ok := c.start(args, func() string {
		if *datasets < 1 || *seeds < 2 {
			return "-datasets must be >= 1 and -seeds >= 2"
		}
		return ""
	})
	if !ok {
		return code
	}
	defer cancel()
	fail, out, workers := c.fail, c.out, c.workers
	report := map[string]any{}
	failed := false
	if c.has("nchain") {
		cfg := ter.DefaultNChainConfig()
		cfg.Datasets = *datasets
		start := time.Now()
		res, err := ter.RunNChain(cfg)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, "== (1) NChain: tabular backups until the greedy policy is optimal")
		if err := ter.WriteNChainTable(stdout, res); err != nil {
			return fail(err)
		}
		png := filepath.Join(*out, "nchain.png")
		if err := ter.SaveNChainPlot(res, png); err != nil {
			return fail(fmt.Errorf("plot: %w", err))
		}
		fmt.Fprintf(stdout, "wrote %s (%.1fs)\n\n", png, time.Since(start).Seconds())
		for _, c := range res.AcceptanceChecks() {
			failed = failed || !c.OK
		}
		report["nchain"] = res
	}
	if c.has("keydoor") {
		cfg := defaultKeyDoor()
		cfg.Workers, cfg.Seeds = *workers, nil
		for i := range *seeds {
			cfg.Seeds = append(cfg.Seeds, uint64(i+1))
		}
		fmt.Fprintf(stdout, "== (2) key-door grid: %s on %s, %d methods x %d seeds\n", cfg.Base.Algo, cfg.Base.Env, len(cfg.Samplers), len(cfg.Seeds))
		start := time.Now()
		res, err := control.Run(ctx, cfg, func(r control.Trial) {
			fmt.Fprintf(stdout, "  %-8s seed %d: steps to threshold %d, final %.1f (%.0fs)\n", r.Sampler, r.Seed, r.StepsTo, r.Final, r.Seconds)
		})
		if err != nil {
			return fail(err)
		}
		if err := control.WriteTable(stdout, res); err != nil {
			return fail(err)
		}
		png := filepath.Join(*out, "keydoor.png")
		if err := control.SavePlot(res, png); err != nil {
			return fail(fmt.Errorf("plot: %w", err))
		}
		c := ter.KeyDoorCheck(res)
		res.Checks = append(res.Checks, c)
		failed = failed || !c.OK
		fmt.Fprintln(stdout, c)
		fmt.Fprintf(stdout, "wrote %s (%.0fs)\n\n", png, time.Since(start).Seconds())
		report["keydoor"] = res
	}
	if c.has("cost") {
		res, err := ter.RunCost(ter.DefaultCostConfig())
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, "== (3) seconds to build one batch (Table B.1)")
		if err := ter.WriteCostTable(stdout, res); err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout)
		report["cost"] = res
	}
	return c.finish("ter.json", report, failed)
}

// defaultKeyDoor is the key-door comparison's configuration.
func defaultKeyDoor() control.Config { return ter.DefaultKeyDoorConfig() }
