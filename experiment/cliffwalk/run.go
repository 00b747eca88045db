package cliffwalk

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Config describes a sweep: every agent, every chain length n in
// [NMin, NMax], Seeds runs each. Start from DefaultConfig; Run validates it
// and applies no defaults of its own.
type Config struct {
	// NMin and NMax bound the chain lengths, 1 <= NMin <= NMax <= MaxN.
	NMin, NMax int
	// Seeds is the number of runs per (agent, n); the table reports the
	// median. The paper uses 10.
	Seeds int
	// Seed is the base seed. Run k of chain n draws its initial Q table and
	// its sampling stream from seeds derived from (Seed, n, k); every agent
	// gets the same ones (common random numbers).
	Seed uint64
	// MaxUpdates caps each run.
	MaxUpdates int64
	// BetaSteps is the number of updates over which the importance-weight
	// exponent beta anneals to 1 (Task.BetaSteps): the "planned training
	// length" PER's schedule needs. The paper's runs end at convergence, so
	// there is none to take; the default is the default cap, 10^7, which
	// keeps beta within 0.06 of its start in every run that converges under
	// 10^6 updates. 0: beta = 1 throughout.
	BetaSteps int64
	// RankRefresh is the rank-based agents' re-sort fraction
	// (sampler.RankConfig.RefreshFraction): the rank order is re-sorted
	// once changes reach this fraction of the ranked items. >= 0; default
	// RankRefreshFraction.
	RankRefresh float64
	// OracleMaxN is the largest n the Oracle agent runs at (its cost per
	// update is O(N)); larger n are reported as skipped. 0 skips it always.
	OracleMaxN int
	// Eta is the Q-learning step size; the paper uses 1/4.
	Eta float64
	// Threshold is the MSE(Q, Q*) at which a run stops; the paper uses 1e-3.
	Threshold float64
	// InitSD is the standard deviation of the Gaussian initial Q values
	// (mean 0). The paper gives theta ~ N(0, 0.1); read as sd 0.1.
	InitSD float64
	// Agents are the agents compared, in column order.
	Agents []Agent `json:"-"`
	// OnRow, if non-nil, is called with each row as soon as it is complete
	// (progress output). It must not retain the row's slices.
	OnRow func(Row) `json:"-"`
}

// DefaultConfig is the paper's setting: n = 2..12, 10 seeds, eta = 1/4,
// stop at MSE < 1e-3, initial Q ~ N(0, 0.1²), at most 10^7 updates per run,
// beta annealed over 10^7 updates, a rank re-sort after changes to 10% of
// the items, the oracle up to n = 12, and DefaultAgents.
func DefaultConfig() Config {
	return Config{
		NMin: 2, NMax: 12, Seeds: 10, Seed: 1,
		MaxUpdates:  10_000_000,
		BetaSteps:   10_000_000,
		RankRefresh: RankRefreshFraction,
		OracleMaxN:  12,
		Eta:         0.25, Threshold: 1e-3, InitSD: 0.1,
		Agents: DefaultAgents(),
	}
}

// Validate reports the first field out of range.
func (c *Config) Validate() error {
	switch {
	case c.NMin < 1 || c.NMax > MaxN || c.NMin > c.NMax:
		return fmt.Errorf("cliffwalk: need 1 <= NMin <= NMax <= %d (-n-min, -n-max), got %d and %d", MaxN, c.NMin, c.NMax)
	case c.Seeds < 1:
		return fmt.Errorf("cliffwalk: Seeds (-seeds) must be positive, got %d", c.Seeds)
	case c.MaxUpdates < 1:
		return fmt.Errorf("cliffwalk: MaxUpdates (-max-updates) must be positive, got %d", c.MaxUpdates)
	case c.BetaSteps < 0:
		return fmt.Errorf("cliffwalk: BetaSteps (-beta-steps) must not be negative, got %d", c.BetaSteps)
	case !(c.RankRefresh >= 0):
		return fmt.Errorf("cliffwalk: RankRefresh (-rank-refresh) must be >= 0, got %v", c.RankRefresh)
	case c.OracleMaxN < 0:
		return fmt.Errorf("cliffwalk: OracleMaxN (-oracle-max-n) must not be negative, got %d", c.OracleMaxN)
	case !(c.Eta > 0 && c.Eta <= 1):
		return fmt.Errorf("cliffwalk: eta must be in (0, 1], got %v", c.Eta)
	case !(c.Threshold > 0) || math.IsInf(c.Threshold, 0):
		return fmt.Errorf("cliffwalk: threshold must be positive and finite, got %v", c.Threshold)
	case !(c.InitSD >= 0) || math.IsInf(c.InitSD, 0):
		return fmt.Errorf("cliffwalk: init sd must be finite and >= 0, got %v", c.InitSD)
	case len(c.Agents) == 0:
		return fmt.Errorf("cliffwalk: no agents")
	}
	seen := map[string]bool{}
	for _, a := range c.Agents {
		if seen[a.Name()] {
			return fmt.Errorf("cliffwalk: duplicate agent name %q", a.Name())
		}
		seen[a.Name()] = true
	}
	return nil
}

// Result is a sweep, finished or stopped early.
type Result struct {
	Config Config
	// Agents are the agents' names, in column order.
	Agents []string
	// Rows are the finished rows, in n order.
	Rows []Row
	// Status is StatusComplete when every row ran, StatusIncomplete when
	// Run's context ended first: Rows then holds only the rows that
	// finished, and Unfinished the chain lengths that did not.
	Status     string
	Unfinished []int `json:",omitempty"`
	// Stopped says why an incomplete sweep stopped (the caller's words,
	// such as "interrupted by SIGINT"); Run leaves it empty.
	Stopped string `json:",omitempty"`
	// Notes is free text for readers of the JSON (the command puts the
	// agents' legend and the wall time here); Run leaves it empty.
	Notes string `json:",omitempty"`
}

// Row is one chain length.
type Row struct {
	N int
	// Memory is the replay memory size, 2^(n+1)-2 (the plot's x axis).
	Memory int
	// Cells has one entry per agent, in Result.Agents order.
	Cells []Cell
}

// Cell is one agent at one chain length.
type Cell struct {
	Agent string
	// Skipped is true when the agent was not run (the oracle above
	// Config.OracleMaxN); the other fields are then zero.
	Skipped bool `json:",omitempty"`
	// Updates is each seed's update count (MaxUpdates for a capped run).
	Updates []int64 `json:",omitempty"`
	// Median, Min and Max summarise Updates; a capped run counts as
	// MaxUpdates, so a median at the cap is a lower bound.
	Median float64
	Min    int64
	Max    int64
	// Capped is the number of runs that stopped at MaxUpdates.
	Capped int
}

// The values of Result.Status.
const (
	StatusComplete   = "complete"
	StatusIncomplete = "incomplete"
)

// Run runs the sweep: for each n, each agent, each seed, one Agent.Learn.
// It is sequential and deterministic: equal configs give equal results.
// Cost: the sum of the runs' costs; see Replay and Oracle.
//
// ctx is checked before each run (not inside one). When it ends, Run
// returns the rows finished so far, with Status StatusIncomplete, and an
// error that wraps ctx's.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	res := &Result{Config: cfg, Status: StatusComplete}
	for _, a := range cfg.Agents {
		res.Agents = append(res.Agents, a.Name())
	}
	for n := cfg.NMin; n <= cfg.NMax; n++ {
		row, err := RunN(ctx, &cfg, n)
		if err != nil && ctx.Err() != nil {
			res.Status = StatusIncomplete
			for m := n; m <= cfg.NMax; m++ {
				res.Unfinished = append(res.Unfinished, m)
			}
			return res, err
		}
		if err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, row)
		if cfg.OnRow != nil {
			cfg.OnRow(row)
		}
	}
	return res, nil
}

// RunN runs every agent and seed of cfg at chain length n (one row of Run).
// cfg must be valid. Rows are independent, so a caller may run them in
// parallel. It checks ctx before each run and returns an error wrapping
// ctx's when it has ended.
func RunN(ctx context.Context, cfg *Config, n int) (Row, error) {
	task, err := NewTask(n, cfg.Eta, cfg.Threshold, cfg.MaxUpdates)
	if err != nil {
		return Row{}, err
	}
	task.BetaSteps, task.RankRefresh = cfg.BetaSteps, cfg.RankRefresh
	row := Row{N: n, Memory: len(task.Memory)}
	for _, a := range cfg.Agents {
		cell := Cell{Agent: a.Name()}
		if _, ok := a.(Oracle); ok && n > cfg.OracleMaxN {
			cell.Skipped = true
			row.Cells = append(row.Cells, cell)
			continue
		}
		for k := range cfg.Seeds {
			if err := ctx.Err(); err != nil {
				return Row{}, fmt.Errorf("cliffwalk: n=%d stopped before %s seed %d: %w", n, a.Name(), k, err)
			}
			q := InitialTable(task.Env, cfg.InitSD, cfg.Seed, n, k)
			rng := rand.New(rand.NewPCG(mix(cfg.Seed, uint64(n), uint64(k), 2), mix(cfg.Seed, uint64(n), uint64(k), 3)))
			out, err := a.Learn(task, q, rng)
			if err != nil {
				return Row{}, fmt.Errorf("cliffwalk: n=%d seed %d: %w", n, k, err)
			}
			cell.Updates = append(cell.Updates, out.Updates)
			if out.Capped {
				cell.Capped++
			}
		}
		cell.Median, cell.Min, cell.Max = summarize(cell.Updates)
		row.Cells = append(row.Cells, cell)
	}
	return row, nil
}

// InitialTable is run k's initial Q table at chain n: every entry drawn
// from N(0, sd²) with a generator seeded from (seed, n, k). O(n).
func InitialTable(env *Env, sd float64, seed uint64, n, k int) Table {
	rng := rand.New(rand.NewPCG(mix(seed, uint64(n), uint64(k), 0), mix(seed, uint64(n), uint64(k), 1)))
	q := make(Table, env.Pairs())
	for i := range q {
		q[i] = sd * rng.NormFloat64()
	}
	return q
}

// mix derives a 64-bit seed from its inputs (SplitMix64 finalizer chain).
func mix(xs ...uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, x := range xs {
		h ^= x + 0x9e3779b97f4a7c15 + h<<6 + h>>2
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

// summarize returns the median (mean of the middle two for an even count),
// the minimum and the maximum of xs (non-empty).
func summarize(xs []int64) (median float64, lo, hi int64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	median = float64(s[m])
	if len(s)%2 == 0 {
		median = (float64(s[m-1]) + float64(s[m])) / 2
	}
	return median, s[0], s[len(s)-1]
}
