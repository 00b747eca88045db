package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apexrl/apex/experiment/cliffwalk"
	"github.com/apexrl/apex/experiment/control"
)

// experiment is one `apex experiment NAME` subcommand.
type experiment struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}

// experiments lists the papers' small experiments, in usage order.
var experiments = []experiment{
	{"cliffwalk", "PER's Blind Cliffwalk (Schaul et al. 2016, Fig. 1): updates to learn Q* vs replay memory size, uniform vs prioritized vs oracle", runCliffwalk},
	{"ners", "NERS (Oh et al. 2021): sampled-batch statistics on SparsePendulum-v1 (Table 3), TD3 on Pendulum-v1 and DDQN on CartPole-v1 under uniform, PER and NERS", runNERS},
	{"lap-pal", "LAP and PAL (Fujimoto et al. 2020): regression fixed points, TD3 on Pendulum-v1 and DDQN on CartPole-v1 under uniform, PER, LAP and PAL", runLAPPAL},
	{"refer", "ReF-ER (Novati & Koumoutsakos 2019): V-RACER on Pendulum-v1 under refer, refer-1, refer-2 and er; the LQR slope vs the Riccati gain; TD3 with and without ReF-ER", runREFER},
	{"ter", "Topological Experience Replay (Hong et al. 2022): NChain backups, DDQN on the key-door grid, and the cost of one batch, TER vs uniform vs PER", runTER},
}

// runExperiment dispatches `apex experiment NAME [flags]`: 0 success, 1
// failure, 2 usage error (no name, or an unknown one).
func runExperiment(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		experimentUsage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		experimentUsage(stdout)
		return 0
	}
	for _, e := range experiments {
		if e.name == args[0] {
			return e.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "apex experiment: unknown experiment %q; valid experiments: %s\n", args[0], experimentNames())
	experimentUsage(stderr)
	return 2
}

func experimentNames() string {
	s := ""
	for i, e := range experiments {
		if i > 0 {
			s += ", "
		}
		s += e.name
	}
	return s
}

func experimentUsage(w io.Writer) {
	fmt.Fprint(w, "usage: apex experiment <name> [flags]   (apex experiment <name> -h for its flags)\n\nexperiments:\n")
	for _, e := range experiments {
		fmt.Fprintf(w, "  %-12s %s\n", e.name, e.summary)
	}
}

// runCliffwalk runs the Blind Cliffwalk sweep, prints its table as rows
// finish, and writes cliffwalk.json and cliffwalk.png to -out.
func runCliffwalk(args []string, stdout, stderr io.Writer) int {
	cfg := cliffwalk.DefaultConfig()
	fs := flag.NewFlagSet("apex experiment cliffwalk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.NMin, "n-min", cfg.NMin, "smallest chain length n")
	fs.IntVar(&cfg.NMax, "n-max", cfg.NMax, fmt.Sprintf("largest chain length n (at most %d; the memory holds 2^(n+1)-2 transitions)", cliffwalk.MaxN))
	fs.IntVar(&cfg.Seeds, "seeds", cfg.Seeds, "runs per agent and n (the table shows the median)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "base seed: run k at chain length n draws its initial Q table and sampling stream from seeds derived from (seed, n, k)")
	fs.Float64Var(&cfg.RankRefresh, "rank-refresh", cfg.RankRefresh, "rank-based PER's re-sort fraction: the rank order is re-sorted once changes reach this fraction of the items (>= 0; 0 re-sorts after every change)")
	fs.Int64Var(&cfg.MaxUpdates, "max-updates", cfg.MaxUpdates, "cap on the updates of one run; capped runs are reported")
	fs.Int64Var(&cfg.BetaSteps, "beta-steps", cfg.BetaSteps, "updates over which the IS exponent beta anneals to 1 (prop, rank)")
	fs.IntVar(&cfg.OracleMaxN, "oracle-max-n", cfg.OracleMaxN, "largest n the oracle runs at (it costs O(memory size) per update)")
	timeout := fs.Duration("timeout", 0, "stop after this wall time and report the sweep as incomplete (0: no limit)")
	out := fs.String("out", "out/cliffwalk", "directory for cliffwalk.png and cliffwalk.json")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: apex experiment cliffwalk [flags]\n\n"+
			"Blind Cliffwalk (PER, Schaul et al. 2016, Figure 1 and Appendix B.1): tabular\n"+
			"Q-learning (eta 1/4, gamma 1-1/n) replaying one transition per update from a\n"+
			"memory of all 2^n action sequences, until MSE(Q, Q*) < 1e-3. Prints the median\n"+
			"number of updates per agent and writes a log-log plot.\n\n"+
			"A sweep stopped by SIGINT, SIGTERM or SIGHUP (a second signal exits at once) or\n"+
			"by -timeout writes the rows that finished to cliffwalk.json, marked incomplete\n"+
			"(no plot), and exits 128+signal (1 for the timeout).\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "apex experiment cliffwalk: %v\n", err)
		return 2
	}
	if *timeout < 0 {
		fmt.Fprintf(stderr, "apex experiment cliffwalk: -timeout must not be negative, got %v\n", *timeout)
		return 2
	}
	if !makeOut("apex experiment cliffwalk", *out, stderr) {
		return 1
	}
	names := make([]string, len(cfg.Agents))
	for i, a := range cfg.Agents {
		names[i] = a.Name()
	}
	fmt.Fprintf(stdout, "Blind Cliffwalk: median updates until MSE(Q, Q*) < %g over %d seeds (cap %d per run)\n",
		cfg.Threshold, cfg.Seeds, cfg.MaxUpdates)
	if err := cliffwalk.WriteTableHeader(stdout, names); err != nil {
		fmt.Fprintf(stderr, "apex experiment cliffwalk: %v\n", err)
		return 1
	}
	cfg.OnRow = func(r cliffwalk.Row) { _ = cliffwalk.WriteTableRow(stdout, r) }
	start := time.Now()
	stop := watchExperiment("apex experiment cliffwalk", *timeout, stderr)
	res, err := cliffwalk.Run(stop.ctx, cfg)
	stop.done()
	if err != nil && (res == nil || res.Status != cliffwalk.StatusIncomplete) {
		fmt.Fprintf(stderr, "apex experiment cliffwalk: %v\n", err)
		return 1
	}
	elapsed := time.Since(start)
	fmt.Fprintf(stdout, "\n%s", cliffwalk.DefaultLegend)
	res.Notes = fmt.Sprintf("%swall time %.1fs", cliffwalk.DefaultLegend, elapsed.Seconds())
	jsonPath := filepath.Join(*out, "cliffwalk.json")
	pngPath := filepath.Join(*out, "cliffwalk.png")
	if res.Status == cliffwalk.StatusIncomplete {
		res.Stopped = stop.why()
		if err := cliffwalk.WriteJSON(res, jsonPath); err != nil {
			fmt.Fprintf(stderr, "apex experiment cliffwalk: %v\n", err)
			return 1
		}
		done := make([]string, len(res.Rows))
		for i, r := range res.Rows {
			done[i] = strconv.Itoa(r.N)
		}
		left := make([]string, len(res.Unfinished))
		for i, n := range res.Unfinished {
			left[i] = strconv.Itoa(n)
		}
		fmt.Fprintf(stdout, "INCOMPLETE: %s after %.0fs. Finished rows: n = %s. Not finished (dropped, no medians): n = %s. No plot written.\n",
			res.Stopped, elapsed.Seconds(), listOrNone(done), listOrNone(left))
		fmt.Fprintf(stdout, "wrote %s, marked incomplete (%.1fs)\n", jsonPath, elapsed.Seconds())
		fmt.Fprintf(stderr, "apex experiment cliffwalk: %s after %.1fs: the finished rows are written to %s, marked incomplete\n", res.Stopped, elapsed.Seconds(), jsonPath)
		return stop.exitCode()
	}
	if err := cliffwalk.WriteJSON(res, jsonPath); err != nil {
		fmt.Fprintf(stderr, "apex experiment cliffwalk: %v\n", err)
		return 1
	}
	if err := cliffwalk.SavePlot(res, pngPath); err != nil {
		fmt.Fprintf(stderr, "apex experiment cliffwalk: plot: %v\n", err)
		return 1
	}
	if k := res.Capped(); k > 0 {
		fmt.Fprintf(stdout, "%d runs hit the cap of %d updates; their medians are lower bounds\n", k, cfg.MaxUpdates)
	}
	if cfg.OracleMaxN < cfg.NMax {
		fmt.Fprintf(stdout, "oracle skipped (-) for n > %d\n", cfg.OracleMaxN)
	}
	fmt.Fprintf(stdout, "wrote %s and %s (%.1fs)\n", pngPath, jsonPath, elapsed.Seconds())
	return 0
}

// selectParts splits a comma-separated -parts value and checks each part
// against valid; an unknown one is reported on stderr, prefixed by cmd.
func selectParts(cmd, value string, valid []string, stderr io.Writer) ([]string, bool) {
	want := strings.Split(value, ",")
	for _, p := range want {
		if !slices.Contains(valid, p) {
			fmt.Fprintf(stderr, "%s: unknown part %q (valid: %s)\n", cmd, p, strings.Join(valid, ", "))
			return nil, false
		}
	}
	return want, true
}

// makeOut creates the output directory dir and proves it writable
// (prepareOut), reporting a failure on stderr prefixed by cmd.
func makeOut(cmd, dir string, stderr io.Writer) bool {
	if err := prepareOut(dir); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return false
	}
	return true
}

// runControlPart trains cfg's runs (experiment/control), printing a line
// per finished run (and recording it with c.record) and then control's
// table, and saves the return plot to png.
func (c *partsCmd) runControlPart(ctx context.Context, title string, cfg control.Config, png string) (*control.Result, error) {
	stdout := c.stdout
	fmt.Fprintf(stdout, "== %s: %s on %s, %d methods x %d seeds, %d steps each\n", title, cfg.Base.Algo, cfg.Base.Env,
		len(cfg.Samplers), len(cfg.Seeds), cfg.Base.Steps)
	start := time.Now()
	res, err := control.Run(ctx, cfg, func(r control.Trial) {
		fmt.Fprintf(stdout, "  %-8s seed %d: final %.1f (%.0fs, replay %.1f%% of learner time)\n", r.Sampler, r.Seed, r.Final,
			r.Seconds, 100*(r.SampleShare+r.WriteBackShare))
		c.record(r.Sampler, r.Seed, r)
	})
	if err != nil {
		return nil, err
	}
	if err := control.WriteTable(stdout, res); err != nil {
		return nil, err
	}
	if err := control.SavePlot(res, png); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s (%.0fs)\n\n", png, time.Since(start).Seconds())
	return res, nil
}

// finishReport writes report as indented JSON to dir/name and says so
// (with the time since start), then returns the command's exit code: 1 if
// failed (an acceptance check failed, already printed), else 0. A write
// error is printed on stderr under cmd's name and also gives 1.
func finishReport(cmd, dir, name string, report any, start time.Time, failed bool, stdout, stderr io.Writer) int {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	path := filepath.Join(dir, name)
	err := enc.Encode(report)
	if err == nil {
		err = os.WriteFile(path, b.Bytes(), 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s (%.0fs in all)\n", path, time.Since(start).Seconds())
	if failed {
		fmt.Fprintln(stdout, "some acceptance checks failed (see above)")
		return 1
	}
	return 0
}
