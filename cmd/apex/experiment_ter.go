package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apexrl/apex/experiment/ter"
)

// terParts are the parts of `apex experiment ter`, in run order.
var terParts = []string{"nchain", "cost"}

// runTER runs the TER experiments (Hong et al. 2022): NChain's tabular
// backups to the optimal return, DDQN on the symbolic key-door grid, and
// the cost of building one batch per sampler. It prints each part's table
// and checks and writes ter.json and the plots to -out. Exit 1 if an
// acceptance check fails.
func runTER(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apex experiment ter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	parts := fs.String("parts", strings.Join(terParts, ","), "comma-separated parts to run: "+strings.Join(terParts, ", "))
	datasets := fs.Int("datasets", ter.DefaultNChainConfig().Datasets, "NChain datasets (>= 1)")
	out := fs.String("out", "out/ter", "directory for ter.json and nchain.png")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: apex experiment ter [flags]\n\n"+
			"Topological Experience Replay (Hong et al. 2022): (1) NChain, tabular Q over\n"+
			"1000 random steps, updates until the greedy policy is optimal for TER, uniform,\n"+
			"PER and episodic backward replay; (3) seconds to build one batch per\n"+
			"sampler (the paper's Table B.1). Part (2), DDQN on the key-door grid, is not\n"+
			"wired yet.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	want := strings.Split(*parts, ",")
	for _, p := range want {
		if !slices.Contains(terParts, p) {
			fmt.Fprintf(stderr, "apex experiment ter: unknown part %q (valid: %s)\n", p, strings.Join(terParts, ", "))
			return 2
		}
	}
	if *datasets < 1 {
		fmt.Fprintf(stderr, "apex experiment ter: -datasets must be >= 1\n")
		return 2
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "apex experiment ter: %v\n", err)
		return 1
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "apex experiment ter: %v\n", err)
		return 1
	}
	report := map[string]any{}
	failed := false
	if slices.Contains(want, "nchain") {
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
	if slices.Contains(want, "cost") {
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
	path := filepath.Join(*out, "ter.json")
	if err := ter.WriteJSON(report, path); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "wrote %s\n", path)
	if failed {
		fmt.Fprintln(stdout, "some acceptance checks failed (see above)")
		return 1
	}
	return 0
}
