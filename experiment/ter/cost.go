package ter

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/sampler"

	"github.com/apexrl/apex/experiment/control"
)

// CostMethods are the stages RunCost can time.
var CostMethods = []string{"uniform", "per", "ter", "ebu"}

// CostConfig is the batch-cost measurement (the part 3, the
// paper's Table B.1): seconds to build one batch (the stage's Sample, plus
// its Weights where it has a Weighter) over a full buffer, excluding the
// learner. Start from DefaultCostConfig.
type CostConfig struct {
	// Env is the environment whose uniformly random transitions fill the
	// buffer; it must have discrete actions and exact state hashes
	// (envs.StateHasher).
	Env string `json:"env"`
	// Capacity is the buffer's capacity; Fill transitions are inserted
	// before timing, in actor batches of InsertBatch.
	Capacity    int `json:"capacity"`
	Fill        int `json:"fill"`
	InsertBatch int `json:"insert_batch"`
	// Sizes are the batch sizes timed.
	Sizes []int `json:"sizes"`
	// Batches is the number of timed batches per (method, size) after the
	// first, which is reported apart (with the stage's construction, where
	// TER and EBU index the whole buffer).
	Batches int `json:"batches"`
	// InsertsPerBatch transitions continue the random walk before each
	// batch (not timed; TER's and EBU's Sample index them, which is timed):
	// the design notes' replay ratio 0.25 is one update per 4 environment
	// steps.
	InsertsPerBatch int `json:"inserts_per_batch"`
	// Methods are the stages timed, a subset of CostMethods.
	Methods []string `json:"methods"`
	// TER and PER configure "ter" and "per".
	TER sampler.TERConfig `json:"-"`
	PER sampler.PERConfig `json:"-"`
	// Seed seeds the random walk (the same for every method) and the
	// sampling streams.
	Seed uint64 `json:"seed"`
}

// DefaultCostConfig fills a buffer of 100k like the key-door runs of the
// design notes (§6.3: C = 100k, B = 32, replay ratio 0.25, Eta 0.5, K = 8,
// P_max = 3): 100k uniformly random steps of KeyDoor-Random (random
// layouts, so thousands of vertices and dozens of terminal ones), inserted
// in batches of 64; then 2000 batches of 32 and of 256 per stage, with 4
// new transitions before each.
func DefaultCostConfig() CostConfig {
	return CostConfig{
		Env: "KeyDoor-Random", Capacity: 100_000, Fill: 100_000, InsertBatch: 64,
		Sizes: []int{32, 256}, Batches: 2000, InsertsPerBatch: 4,
		Methods: slices.Clone(CostMethods),
		TER:     sampler.DefaultTERConfig(2000), PER: sampler.DefaultPERConfig(2000),
		Seed: 1,
	}
}

// Validate reports the first field out of range.
func (c *CostConfig) Validate() error {
	switch {
	case c.Capacity < 1 || c.Fill < 1 || c.InsertBatch < 1:
		return fmt.Errorf("ter: Capacity, Fill and InsertBatch must be positive, got %d, %d, %d", c.Capacity, c.Fill, c.InsertBatch)
	case c.Batches < 1:
		return fmt.Errorf("ter: Batches must be positive, got %d", c.Batches)
	case c.InsertsPerBatch < 0:
		return fmt.Errorf("ter: InsertsPerBatch must not be negative, got %d", c.InsertsPerBatch)
	case len(c.Sizes) == 0 || len(c.Methods) == 0:
		return errors.New("ter: no batch sizes or no methods")
	}
	for _, s := range c.Sizes {
		if s < 1 || s > min(c.Fill, c.Capacity) {
			return fmt.Errorf("ter: batch size %d outside [1, %d]", s, min(c.Fill, c.Capacity))
		}
	}
	for i, m := range c.Methods {
		if !slices.Contains(CostMethods, m) {
			return fmt.Errorf("ter: unknown method %q (valid: %v)", m, CostMethods)
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

// CostResult is a finished measurement.
type CostResult struct {
	Config CostConfig `json:"config"`
	// Rows has one entry per (method, size), methods outer.
	Rows []CostRow `json:"rows"`
	// Notes is free text for readers of the JSON; RunCost leaves it empty.
	Notes string `json:"notes,omitempty"`
}

// CostRow is one stage at one batch size. Times are seconds per batch.
type CostRow struct {
	Method string `json:"method"`
	Stage  string `json:"stage"`
	Batch  int    `json:"batch"`
	// Setup is the stage's constructor (TER and EBU index the stored
	// items in it); First is the first batch.
	Setup float64 `json:"setup"`
	First float64 `json:"first"`
	// Mean, Median, Min, Max and P99 summarise the Batches timed batches
	// after the first.
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	P99    float64 `json:"p99"`
	// Size is the number of stored items at the end.
	Size int `json:"size"`
	// TER and EBU are the stage's counters at the end (nil for others).
	TER *sampler.TERStats `json:"ter,omitempty"`
	EBU *EBUStats         `json:"ebu,omitempty"`
}

// RunCost fills a fresh buffer for every (method, size) with the same
// random walk and times Batches+1 batches of that size: before each,
// InsertsPerBatch transitions are inserted; after each, uniformly random
// |δ| in [0, 1) are written back (neither is timed). Deterministic except
// for the times (see elapsed).
func RunCost(cfg CostConfig) (*CostResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	res := &CostResult{Config: cfg}
	res.Config.Methods, res.Config.Sizes = slices.Clone(cfg.Methods), slices.Clone(cfg.Sizes)
	for _, m := range cfg.Methods {
		for _, n := range cfg.Sizes {
			row, err := costRow(&cfg, m, n)
			if err != nil {
				return nil, fmt.Errorf("ter: cost of %s at %d: %w", m, n, err)
			}
			res.Rows = append(res.Rows, row)
		}
	}
	return res, nil
}

func costRow(c *CostConfig, method string, n int) (CostRow, error) {
	w, err := newWalker(c.Env, c.Seed)
	if err != nil {
		return CostRow{}, err
	}
	buf, err := buffer.New(buffer.Config{Capacity: c.Capacity, ObsDim: w.obsDim, Action: buffer.Discrete,
		NumActions: w.actions, Episode: true, StateHash: true})
	if err != nil {
		return CostRow{}, err
	}
	for done := 0; done < c.Fill; done += c.InsertBatch {
		if err := buf.Insert(w.next(min(c.InsertBatch, c.Fill-done))); err != nil {
			return CostRow{}, err
		}
	}
	var sel sampler.Selector
	var wt sampler.Weighter
	var stats func() // records the stage's own counters in row (TER's, EBU's)
	var row CostRow
	setup, err := elapsed(func() error {
		switch method {
		case "uniform":
			u := sampler.NewUniform(buf)
			sel, wt = u, u
		case "per":
			p, err := sampler.NewPER(buf, c.PER)
			sel, wt = p, p
			return err
		case "ter":
			t, err := sampler.NewTER(buf, c.TER)
			sel, wt = t, t
			stats = func() { st := t.Stats(); row.TER = &st }
			return err
		case "ebu":
			e, err := NewEBU(buf)
			sel = e
			stats = func() { st := e.Stats(); row.EBU = &st }
			return err
		}
		return nil
	})
	if err != nil {
		return CostRow{}, err
	}
	rng := rand.New(rand.NewPCG(mix(c.Seed, uint64(n), 8, nameSeed(method)), mix(c.Seed, uint64(n), 9, nameSeed(method))))
	b, err := buf.NewBatch(n)
	if err != nil {
		return CostRow{}, err
	}
	absTD := make([]float64, n)
	build := func(step int64) func() error {
		return func() error {
			if err := sel.Sample(rng, b); err != nil {
				return err
			}
			if wt != nil {
				return wt.Weights(b, step)
			}
			return nil
		}
	}
	row = CostRow{Method: method, Stage: sel.String(), Batch: n, Setup: setup}
	secs := make([]float64, 0, c.Batches)
	for i := range c.Batches + 1 {
		if i > 0 && c.InsertsPerBatch > 0 {
			if err := buf.Insert(w.next(c.InsertsPerBatch)); err != nil {
				return row, err
			}
		}
		s, err := elapsed(build(int64(i)))
		if err != nil {
			return row, err
		}
		if i == 0 {
			row.First = s
		} else {
			secs = append(secs, s)
		}
		for j := range absTD {
			absTD[j] = rng.Float64()
		}
		if _, err := sel.Update(b.Refs, absTD); err != nil {
			return row, err
		}
	}
	slices.Sort(secs)
	row.Min, row.Max = secs[0], secs[len(secs)-1]
	row.Median = secs[(len(secs)-1)/2]
	if len(secs)%2 == 0 {
		row.Median = (secs[len(secs)/2-1] + secs[len(secs)/2]) / 2
	}
	row.P99 = secs[min(len(secs)-1, (99*len(secs)+99)/100-1)]
	for _, s := range secs {
		row.Mean += s
	}
	row.Mean /= float64(len(secs))
	row.Size = buf.Size()
	if stats != nil {
		stats()
	}
	return row, nil
}

// elapsed is the package's only clock read: the wall time of f, in
// seconds, from time.Now and time.Since. Everything else in the package is
// a deterministic function of its config; RunCost's times are not.
func elapsed(f func() error) (float64, error) {
	t0 := time.Now()
	err := f()
	return time.Since(t0).Seconds(), err
}

// walker is a uniformly random policy in an environment with exact state
// hashes, producing columnar transitions as an actor would.
type walker struct {
	env             envs.Env
	hash            envs.StateHasher
	rng             *rand.Rand
	obs             []float64
	obsDim, actions int
	episode, step   int
	seed            uint64
	t               buffer.Transitions
}

func newWalker(name string, seed uint64) (*walker, error) {
	env, err := envs.Make(name)
	if err != nil {
		return nil, err
	}
	h, ok := env.(envs.StateHasher)
	d, isDiscrete := env.ActionSpace().(envs.Discrete)
	if !ok || !isDiscrete {
		return nil, fmt.Errorf("ter: %s needs exact state hashes and discrete actions", name)
	}
	w := &walker{env: env, hash: h, rng: rand.New(rand.NewPCG(seed, mix(seed, 10))), obsDim: env.ObservationSpace().Dim(), actions: d.N, seed: seed}
	w.obs = env.Reset(mix(seed, 0))
	return w, nil
}

// next returns the walk's next n transitions (the slices are reused by the
// following call).
func (w *walker) next(n int) *buffer.Transitions {
	t, d := &w.t, w.obsDim
	t.Obs, t.NextObs = resize(t.Obs, n*d), resize(t.NextObs, n*d)
	t.Action, t.Reward, t.Discount, t.Flags = resize(t.Action, n), resize(t.Reward, n), resize(t.Discount, n), resize(t.Flags, n)
	t.EpisodeID, t.EpisodeStep = resize(t.EpisodeID, n), resize(t.EpisodeStep, n)
	t.StateHash, t.NextStateHash = resize(t.StateHash, n), resize(t.NextStateHash, n)
	for i := range n {
		s := w.hash.StateHash()
		a := w.rng.IntN(w.actions)
		r, err := w.env.Step(envs.Action{Index: a})
		if err != nil {
			panic("ter: walker: " + err.Error()) // a valid action in a live episode
		}
		for j := range d {
			t.Obs[i*d+j], t.NextObs[i*d+j] = float32(w.obs[j]), float32(r.Obs[j])
		}
		t.Action[i], t.Reward[i], t.Discount[i], t.Flags[i] = int32(a), float32(r.Reward), 0.99, 0
		switch {
		case r.Terminated:
			t.Flags[i], t.Discount[i] = buffer.FlagTerminal, 0
		case r.Truncated:
			t.Flags[i] = buffer.FlagTruncated
		}
		t.EpisodeID[i], t.EpisodeStep[i] = uint64(w.episode), int32(w.step)
		t.StateHash[i], t.NextStateHash[i] = s, w.hash.StateHash()
		w.obs, w.step = r.Obs, w.step+1
		if r.Done() {
			w.episode, w.step = w.episode+1, 0
			w.obs = w.env.Reset(mix(w.seed, uint64(w.episode)))
		}
	}
	return t
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// WriteCostTable writes res like the paper's Table B.1: per stage and
// batch size the mean, median, min, max and p99 seconds to build one
// batch, the first batch and the stage's construction apart; then TER's
// graph and EBU's episodes.
func WriteCostTable(w io.Writer, res *CostResult) error {
	var b strings.Builder
	c := &res.Config
	fmt.Fprintf(&b, "Seconds to build one batch (Sample + Weights, no learner) over a buffer of %d holding %d uniformly random %s steps;\n", c.Capacity, min(c.Fill, c.Capacity), c.Env)
	fmt.Fprintf(&b, "%d timed batches per row, %d new transitions inserted before each (not timed), random |δ| written back after each (not timed).\n", c.Batches, c.InsertsPerBatch)
	rows := [][]string{{"method", "batch", "mean", "median", "min", "max", "p99", "first batch", "setup (index)"}}
	for _, r := range res.Rows {
		rows = append(rows, []string{r.Method, fmt.Sprint(r.Batch), sec(r.Mean), sec(r.Median), sec(r.Min), sec(r.Max), sec(r.P99), sec(r.First), sec(r.Setup)})
	}
	control.WriteColumns(&b, rows, "  ", " ")
	b.WriteString("stages:\n")
	seen := map[string]bool{}
	for _, r := range res.Rows {
		if !seen[r.Method] {
			seen[r.Method] = true
			fmt.Fprintf(&b, "  %-8s %s\n", r.Method, r.Stage)
		}
		if s := r.TER; s != nil {
			fmt.Fprintf(&b, "  %-8s B=%d: |V| %d, |V_E| %d, %d edges, %d transitions; %d sweeps, %d expansions, %d queued, %d dropped, %d pruned, %d fallback rows\n",
				"", r.Batch, s.Vertices, s.Terminals, s.Edges, s.Transitions, s.Sweeps, s.Expanded, s.Queued, s.Dropped, s.Pruned, s.Fallbacks)
		}
		if s := r.EBU; s != nil {
			fmt.Fprintf(&b, "  %-8s B=%d: %d successful episodes, %d passes, %d rows replayed, %d uniform, %d stale skipped\n",
				"", r.Batch, s.Episodes, s.Passes, s.Replayed, s.Uniform, s.Skipped)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func sec(s float64) string { return fmt.Sprintf("%.2e", s) }
