package ter

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/experiment/control"
	"github.com/apexrl/apex/sampler"
)

// NChainMethods are the replay methods RunNChain compares, by name:
//
//	ter         sampler.TER over the buffer: B = 1, Eta 0 (every row from
//	            the sweep), edges keyed by (predecessor, action)
//	uniform     sampler.Uniform
//	per         sampler.PER (alpha 0.6, eps 1e-6), without importance
//	            weights (beta 0), as the script's update has none
//	per-greedy  GreedyPER: the script's tabular greedy max-priority PER
//	ebu         EBU: plain backward replay of the successful episodes
var NChainMethods = []string{"ter", "uniform", "per", "per-greedy", "ebu"}

// NChainConfig is the NChain experiment (the part 1). Start from
// DefaultNChainConfig; RunNChain validates it and adds no defaults.
type NChainConfig struct {
	// N is the chain length (states s_1..s_N); the time limit is 2N².
	N int `json:"n"`
	// Steps is the number of uniformly random environment steps in each
	// dataset (the script's 1000).
	Steps int `json:"steps"`
	// Datasets is the number of datasets (the issue asks for >= 50).
	Datasets int `json:"datasets"`
	// Updates is the number of one-transition updates per run (100).
	Updates int `json:"updates"`
	// Within is the horizon of the TER criterion (40 updates).
	Within int `json:"within"`
	// LR and Gamma are the tabular learner's step size and discount
	// (0.98 and 0.99, the script's).
	LR    float64 `json:"lr"`
	Gamma float64 `json:"gamma"`
	// InitMax: Q starts U[0, InitMax) (0.1), drawn per dataset, the same
	// table for every method.
	InitMax float64 `json:"init_max"`
	// Seed is the base seed of the datasets, initial tables and sampling
	// streams.
	Seed uint64 `json:"seed"`
	// MaxAttempts bounds the redraws of a dataset without a success.
	MaxAttempts int `json:"max_attempts"`
	// Methods are the methods compared, a subset of NChainMethods, in
	// table order.
	Methods []string `json:"methods"`
	// TER configures "ter" (and ExactSweep).
	TER sampler.TERConfig `json:"-"`
	// PER configures "per".
	PER sampler.PERConfig `json:"-"`
}

// DefaultNChainConfig is the script's setting over 100 datasets: N = 20,
// 1000 random steps, lr 0.98, gamma 0.99, Q ~ U[0, 0.1), 100 updates of
// one transition; TER with Eta 0, K = 8 roots, P_max = 3 and edges keyed
// by (predecessor, action) as the script keys them; PER with alpha 0.6
// and no importance weights.
func DefaultNChainConfig() NChainConfig {
	t := sampler.DefaultTERConfig(100)
	t.Eta, t.EdgeAction = 0, true
	p := sampler.DefaultPERConfig(100)
	p.Beta = sampler.Linear{} // beta 0: every weight 1, the script's plain update
	return NChainConfig{
		N: envs.NChainDefaultSize, Steps: 1000, Datasets: 100, Updates: 100, Within: 40,
		LR: 0.98, Gamma: 0.99, InitMax: 0.1, Seed: 1, MaxAttempts: 100,
		Methods: slices.Clone(NChainMethods), TER: t, PER: p,
	}
}

// Validate reports the first field out of range.
func (c *NChainConfig) Validate() error {
	switch {
	case c.N < 3 || c.N > 1<<12:
		return fmt.Errorf("ter: N must be in [3, 4096], got %d", c.N)
	case c.Steps < 1:
		return fmt.Errorf("ter: Steps must be positive, got %d", c.Steps)
	case c.Datasets < 1:
		return fmt.Errorf("ter: Datasets must be positive, got %d", c.Datasets)
	case c.Updates < 1:
		return fmt.Errorf("ter: Updates must be positive, got %d", c.Updates)
	case c.Within < 1 || c.Within > c.Updates:
		return fmt.Errorf("ter: Within must be in [1, Updates=%d], got %d", c.Updates, c.Within)
	case !(c.LR > 0 && c.LR <= 1):
		return fmt.Errorf("ter: LR must be in (0, 1], got %v", c.LR)
	case !(c.Gamma > 0 && c.Gamma < 1):
		return fmt.Errorf("ter: Gamma must be in (0, 1), got %v", c.Gamma)
	case !(c.InitMax >= 0) || math.IsInf(c.InitMax, 0):
		return fmt.Errorf("ter: InitMax must be finite and >= 0, got %v", c.InitMax)
	case c.MaxAttempts < 1:
		return fmt.Errorf("ter: MaxAttempts must be positive, got %d", c.MaxAttempts)
	case len(c.Methods) == 0:
		return errors.New("ter: no methods")
	}
	for i, m := range c.Methods {
		if !slices.Contains(NChainMethods, m) {
			return fmt.Errorf("ter: unknown method %q (valid: %v)", m, NChainMethods)
		}
		if slices.Contains(c.Methods[:i], m) {
			return fmt.Errorf("ter: method %q listed twice", m)
		}
	}
	if err := c.TER.Validate(); err != nil {
		return err
	}
	return c.PER.Validate()
}

// NChainResult is a finished NChain experiment.
type NChainResult struct {
	Config NChainConfig `json:"config"`
	// Methods holds one entry per Config.Methods, in order.
	Methods []MethodResult `json:"methods"`
	// Datasets summarises each dataset.
	Datasets []DatasetInfo `json:"datasets"`
	// Exact is the lr = 1 sweep check over every dataset (ExactSweep).
	Exact ExactSummary `json:"exact_sweep"`
	// Optimal is the optimal greedy return, 1 - (N-1)/(2N²).
	Optimal float64 `json:"optimal_return"`
	// Notes is free text for readers of the JSON; RunNChain leaves it
	// empty.
	Notes string `json:"notes,omitempty"`
}

// DatasetInfo describes one dataset.
type DatasetInfo struct {
	Successes   int `json:"successes"`
	Truncations int `json:"truncations"`
	Attempts    int `json:"attempts"`
	Pairs       int `json:"pairs"` // distinct (state, action) pairs present
}

// MethodResult is one method over all datasets.
type MethodResult struct {
	Method string `json:"method"`
	Stage  string `json:"stage"` // the stage's String()
	// First[d] is the first update (1-based) after which the greedy
	// return on dataset d was optimal, or Updates+1 if it never was
	// within Updates (censored).
	First []int `json:"first_optimal"`
	// SolvedWithin and Solved are the fractions of datasets with First <=
	// Within and First <= Updates.
	SolvedWithin float64 `json:"solved_within"`
	Solved       float64 `json:"solved"`
	// Median, P10 and P90 are nearest-rank quantiles of First (a value
	// Updates+1 reads "not within Updates").
	Median int `json:"median"`
	P10    int `json:"p10"`
	P90    int `json:"p90"`
	// QErr[d] is mean |Q - Q*| after the last update on dataset d;
	// MeanQErr their mean.
	QErr     []float64 `json:"q_error"`
	MeanQErr float64   `json:"mean_q_error"`
	// SolvedCurve[u] is the fraction of datasets with First <= u, and
	// MeanReturn[u] the mean greedy return after u updates, u = 0..Updates.
	SolvedCurve []float64 `json:"solved_curve"`
	MeanReturn  []float64 `json:"mean_return"`
	// OtherRows counts rows "ter" did not take from its sweep (PER rows or
	// fallbacks; 0 with Eta 0 and a terminal in every dataset).
	OtherRows int `json:"other_rows,omitempty"`
}

// Censored reports whether a First value means "not within Updates".
func (r *NChainResult) Censored(first int) bool { return first > r.Config.Updates }

// Method returns the result of the named method, or nil.
func (r *NChainResult) Method(name string) *MethodResult {
	for i := range r.Methods {
		if r.Methods[i].Method == name {
			return &r.Methods[i]
		}
	}
	return nil
}

// RunNChain runs every method on every dataset: dataset d is
// CollectDataset(N, Steps, Seed, d, MaxAttempts) stored in a fresh buffer
// per method (Dataset.Buffer), learned from the same initial table
// (InitialTable) with the method's own sampling stream; then ExactSweep on
// it. Sequential and deterministic: equal configs give equal results. The
// default config takes well under a second on one core.
func RunNChain(cfg NChainConfig) (*NChainResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	env, err := envs.NewNChain(envs.WithSize(cfg.N))
	if err != nil {
		return nil, err
	}
	res := &NChainResult{Config: cfg, Optimal: 1 - float64(cfg.N-1)/float64(env.MaxEpisodeSteps())}
	res.Config.Methods = slices.Clone(cfg.Methods)
	qstar := QStar(cfg.N, cfg.Gamma)
	runs := make([]run, len(cfg.Methods))
	for d := range cfg.Datasets {
		ds, err := CollectDataset(cfg.N, cfg.Steps, cfg.Seed, d, cfg.MaxAttempts)
		if err != nil {
			return nil, err
		}
		pairs := 0
		for _, ok := range ds.Pairs() {
			if ok {
				pairs++
			}
		}
		res.Datasets = append(res.Datasets, DatasetInfo{ds.Successes, ds.Truncations, ds.Attempts, pairs})
		q0 := InitialTable(cfg.N, cfg.InitMax, cfg.Seed, d)
		for i, m := range cfg.Methods {
			rng := rand.New(rand.NewPCG(mix(cfg.Seed, uint64(d), 2, nameSeed(m)), mix(cfg.Seed, uint64(d), 3, nameSeed(m))))
			out, err := learn(&cfg, m, ds, slices.Clone(q0), qstar, env, rng)
			if err != nil {
				return nil, fmt.Errorf("ter: dataset %d, %s: %w", d, m, err)
			}
			runs[i].add(out, cfg.Updates)
		}
		ex, err := ExactSweep(&cfg, ds, d)
		if err != nil {
			return nil, fmt.Errorf("ter: dataset %d, exact sweep: %w", d, err)
		}
		res.Exact.add(ex)
	}
	for i, m := range cfg.Methods {
		res.Methods = append(res.Methods, runs[i].summary(m, &cfg))
	}
	return res, nil
}

// InitialTable is dataset d's initial Q table: 2N entries U[0, hi) from a
// generator seeded by (seed, d).
func InitialTable(n int, hi float64, seed uint64, d int) Table {
	rng := rand.New(rand.NewPCG(mix(seed, uint64(d), 4), mix(seed, uint64(d), 5)))
	q := make(Table, 2*n)
	for i := range q {
		q[i] = hi * rng.Float64()
	}
	return q
}

// outcome is one method on one dataset.
type outcome struct {
	stage     string
	first     int       // Updates+1 if never optimal
	returns   []float64 // greedy return after u updates, u = 0..Updates
	qerr      float64
	otherRows int
}

// run accumulates one method's outcomes.
type run struct {
	stage     string
	first     []int
	qerr      []float64
	returns   []float64 // sums
	otherRows int
}

func (r *run) add(o outcome, updates int) {
	r.stage = o.stage
	r.first = append(r.first, o.first)
	r.qerr = append(r.qerr, o.qerr)
	if r.returns == nil {
		r.returns = make([]float64, updates+1)
	}
	for u, v := range o.returns {
		r.returns[u] += v
	}
	r.otherRows += o.otherRows
}

func (r *run) summary(name string, c *NChainConfig) MethodResult {
	n := float64(len(r.first))
	m := MethodResult{Method: name, Stage: r.stage, First: r.first, QErr: r.qerr, OtherRows: r.otherRows,
		SolvedCurve: make([]float64, c.Updates+1), MeanReturn: make([]float64, c.Updates+1)}
	for _, f := range r.first {
		if f <= c.Within {
			m.SolvedWithin++
		}
		if f <= c.Updates {
			m.Solved++
			for u := f; u <= c.Updates; u++ {
				m.SolvedCurve[u]++
			}
		}
	}
	m.SolvedWithin /= n
	m.Solved /= n
	for u := range m.SolvedCurve {
		m.SolvedCurve[u] /= n
		m.MeanReturn[u] = r.returns[u] / n
	}
	s := slices.Clone(r.first)
	slices.Sort(s)
	m.P10, m.Median, m.P90 = nearestRank(s, 0.1), nearestRank(s, 0.5), nearestRank(s, 0.9)
	for _, e := range r.qerr {
		m.MeanQErr += e
	}
	m.MeanQErr /= n
	return m
}

// nearestRank is the p-quantile of sorted s by the nearest-rank rule: the
// ceil(p·n)-th smallest value.
func nearestRank(s []int, p float64) int {
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// newStage builds method name over buf. Every stage is a sampler.Selector;
// w is its Weighter, if it has one; fromSweep, TER's only, reports whether
// a row of the last batch came from a reverse sweep.
func newStage(c *NChainConfig, name string, buf *buffer.Buffer) (sel sampler.Selector, w sampler.Weighter, fromSweep func(row int) bool, err error) {
	switch name {
	case "ter":
		t, err := sampler.NewTER(buf, c.TER)
		if err != nil {
			return nil, nil, nil, err
		}
		return t, t, t.FromSweep, nil
	case "uniform":
		u := sampler.NewUniform(buf)
		return u, u, nil, nil
	case "per":
		p, err := sampler.NewPER(buf, c.PER)
		return p, p, nil, err
	case "per-greedy":
		g, err := NewGreedyPER(buf)
		return g, nil, nil, err
	case "ebu":
		e, err := NewEBU(buf)
		return e, nil, nil, err
	}
	return nil, nil, nil, fmt.Errorf("ter: unknown method %q", name)
}

// learn runs one method on one dataset: Updates one-row batches, each
// sampled from the method's stage over a fresh buffer of ds, weighted by
// its Weighter (if any), applied to q, and written back through Update;
// the greedy episode after every update.
func learn(c *NChainConfig, name string, ds *Dataset, q, qstar Table, env *envs.NChain, rng *rand.Rand) (outcome, error) {
	buf, err := ds.Buffer(c.Gamma)
	if err != nil {
		return outcome{}, err
	}
	sel, wt, fromSweep, err := newStage(c, name, buf)
	if err != nil {
		return outcome{}, err
	}
	out := outcome{stage: sel.String(), first: c.Updates + 1, returns: make([]float64, c.Updates+1)}
	seen := make([]bool, c.N)
	eval := func(u int) error {
		steps, ok, err := greedyEpisode(env, q, seen)
		if err != nil {
			return err
		}
		if ok {
			out.returns[u] = 1 - float64(steps)/float64(env.MaxEpisodeSteps())
			if steps == c.N-1 && u > 0 && out.first > c.Updates {
				out.first = u
			}
		}
		return nil
	}
	if err := eval(0); err != nil {
		return out, err
	}
	b, err := buf.NewBatch(1)
	if err != nil {
		return out, err
	}
	absTD := make([]float64, 1)
	for u := 1; u <= c.Updates; u++ {
		if err := sel.Sample(rng, b); err != nil {
			return out, err
		}
		if fromSweep != nil && !fromSweep(0) {
			out.otherRows++
		}
		if wt != nil {
			if err := wt.Weights(b, int64(u-1)); err != nil {
				return out, err
			}
		} else {
			b.Weight[0] = 1
		}
		absTD[0] = q.update(b, 0, c.LR, c.Gamma)
		if _, err := sel.Update(b.Refs, absTD); err != nil {
			return out, err
		}
		if err := eval(u); err != nil {
			return out, err
		}
	}
	out.qerr = QError(q, qstar)
	return out, nil
}

// update applies row of b to q: δ = r + gamma·max_a Q(s', a) − Q(s, a)
// (no bootstrap after a true termination; a truncated transition
// bootstraps), Q(s, a) += lr·w·δ with w = b.Weight[row]. It returns |δ|.
func (q Table) update(b *buffer.Batch, row int, lr, gamma float64) float64 {
	s, a, s2 := int(b.StateHash[row]), int(b.Action[row]), int(b.NextStateHash[row])
	target := float64(b.Reward[row])
	if b.Flags[row]&buffer.FlagTerminal == 0 {
		target += gamma * q.Max(s2)
	}
	i := 2*s + a
	delta := target - q[i]
	q[i] += lr * b.Weight[row] * delta
	return math.Abs(delta)
}

// ExactResult is one dataset's exact sweep check.
type ExactResult struct {
	// Updates is the length of the first sweep (one update per row); Pairs
	// the distinct (state, action) pairs in the dataset.
	Updates, Pairs int
	// Exact: after the sweep Q == Q* (QStar, compared with ==) on every
	// pair in the dataset, and Q == 0 elsewhere. Mismatch lists the
	// pairs (2k+a) where it does not hold.
	Exact    bool
	Mismatch []int
}

// ExactSummary aggregates ExactResults.
type ExactSummary struct {
	Datasets, Exact        int
	MinUpdates, MaxUpdates int
	MinPairs, MaxPairs     int
	// UpdatesEqualPairs counts the datasets whose sweep replayed each pair
	// exactly once.
	UpdatesEqualPairs int
	// Mismatch lists the first failing dataset's mismatched pairs.
	MismatchDataset int   `json:",omitempty"`
	Mismatch        []int `json:",omitempty"`
}

func (s *ExactSummary) add(r ExactResult) {
	if s.Datasets == 0 {
		s.MinUpdates, s.MaxUpdates, s.MinPairs, s.MaxPairs = r.Updates, r.Updates, r.Pairs, r.Pairs
	}
	s.MinUpdates, s.MaxUpdates = min(s.MinUpdates, r.Updates), max(s.MaxUpdates, r.Updates)
	s.MinPairs, s.MaxPairs = min(s.MinPairs, r.Pairs), max(s.MaxPairs, r.Pairs)
	if r.Exact {
		s.Exact++
	} else if s.Mismatch == nil {
		s.MismatchDataset, s.Mismatch = s.Datasets, r.Mismatch
	}
	if r.Updates == r.Pairs {
		s.UpdatesEqualPairs++
	}
	s.Datasets++
}

// ExactSweep is the deterministic check of the design notes (§6.1): over
// a fresh buffer of ds, with lr = 1 and Q = 0, it replays the first full
// sweep of the real sampler.TER (c.TER with Eta forced to 0, so every row
// comes from the sweep; one row per update, until the first row of sweep
// 2) and compares Q with QStar exactly. Each update sets Q(s, a) = r +
// gamma·max Q(s', ·) from Q(s, a) = 0, so a sweep that updates every
// successor before its predecessors reproduces the Bellman recursion bit
// for bit. d seeds the sweep's stream.
func ExactSweep(c *NChainConfig, ds *Dataset, d int) (ExactResult, error) {
	buf, err := ds.Buffer(c.Gamma)
	if err != nil {
		return ExactResult{}, err
	}
	tc := c.TER
	tc.Eta = 0
	t, err := sampler.NewTER(buf, tc)
	if err != nil {
		return ExactResult{}, err
	}
	rng := rand.New(rand.NewPCG(mix(c.Seed, uint64(d), 6), mix(c.Seed, uint64(d), 7)))
	q := make(Table, 2*ds.N)
	b, err := buf.NewBatch(1)
	if err != nil {
		return ExactResult{}, err
	}
	present := ds.Pairs()
	var r ExactResult
	for _, ok := range present {
		if ok {
			r.Pairs++
		}
	}
	for limit := 4 * len(ds.Steps); ; limit-- {
		if limit == 0 {
			return r, fmt.Errorf("ter: the first sweep did not end within %d rows", 4*len(ds.Steps))
		}
		if err := t.Sample(rng, b); err != nil {
			return r, err
		}
		if !t.FromSweep(0) {
			return r, fmt.Errorf("ter: row %d of the exact sweep did not come from the sweep (stats %+v)", r.Updates, t.Stats())
		}
		if t.Sweep(0) != 1 {
			break
		}
		b.Weight[0] = 1
		q.update(b, 0, 1, c.Gamma)
		r.Updates++
	}
	qstar := QStar(ds.N, c.Gamma)
	for i, ok := range present {
		want := 0.0
		if ok {
			want = qstar[i]
		}
		if q[i] != want {
			r.Mismatch = append(r.Mismatch, i)
		}
	}
	r.Exact = len(r.Mismatch) == 0
	return r, nil
}

// Check is one acceptance criterion and whether it held.
type Check = control.Check

// AcceptanceChecks evaluates the NChain criteria (those whose
// methods ran): TER optimal within Within updates on >= 95% of datasets;
// uniform, per and per-greedy optimal within Updates on <= 5%; TER's mean
// |Q - Q*| the lowest; the exact sweep on every dataset. The design notes'
// extra criterion (§6.1: EBU's median at least 1.5× TER's) is listed last,
// marked as such.
func (r *NChainResult) AcceptanceChecks() []Check {
	c := &r.Config
	var out []Check
	ter := r.Method("ter")
	if ter != nil {
		out = append(out, Check{What: fmt.Sprintf("ter reaches the optimal return within %d updates on >= 95%% of datasets: %.1f%%", c.Within, 100*ter.SolvedWithin),
			OK: ter.SolvedWithin >= 0.95})
	}
	for _, name := range []string{"uniform", "per", "per-greedy"} {
		if m := r.Method(name); m != nil {
			out = append(out, Check{What: fmt.Sprintf("%s reaches it within %d updates on <= 5%% of datasets: %.1f%%", name, c.Updates, 100*m.Solved),
				OK: m.Solved <= 0.05})
		}
	}
	if ter != nil && len(r.Methods) > 1 {
		best, ok := "", true
		bestErr := math.Inf(1)
		for _, m := range r.Methods {
			if m.Method != "ter" && m.MeanQErr < bestErr {
				best, bestErr = m.Method, m.MeanQErr
			}
			if m.Method != "ter" && m.MeanQErr <= ter.MeanQErr {
				ok = false
			}
		}
		out = append(out, Check{What: fmt.Sprintf("ter has the lowest mean |Q - Q*| after %d updates: %.4f (next: %s %.4f)", c.Updates, ter.MeanQErr, best, bestErr), OK: ok})
	}
	e := &r.Exact
	out = append(out, Check{What: fmt.Sprintf("one TER sweep with lr = 1 from Q = 0 gives Q == Q* exactly on every pair of the data: %d of %d datasets (%d-%d updates per sweep)",
		e.Exact, e.Datasets, e.MinUpdates, e.MaxUpdates),
		OK: e.Datasets > 0 && e.Exact == e.Datasets})
	if ebu := r.Method("ebu"); ebu != nil && ter != nil {
		out = append(out, Check{What: fmt.Sprintf("(design notes §6.1) ebu's median updates are >= 1.5x ter's: %s vs %s", r.fmtFirst(ebu.Median), r.fmtFirst(ter.Median)),
			OK: float64(ebu.Median) >= 1.5*float64(ter.Median)})
	}
	return out
}

// fmtFirst prints a First value or quantile, ">U" when censored.
func (r *NChainResult) fmtFirst(v int) string {
	if r.Censored(v) {
		return fmt.Sprintf(">%d", r.Config.Updates)
	}
	return fmt.Sprint(v)
}
