package cliffwalk

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

func TestMemoryHoldsEverySequence(t *testing.T) {
	for n := 1; n <= 10; n++ {
		env, err := NewEnv(n)
		if err != nil {
			t.Fatal(err)
		}
		m := env.Memory()
		if len(m) != MemorySize(n) || len(m) != 1<<(n+1)-2 {
			t.Fatalf("n=%d: memory holds %d transitions, want 2^(n+1)-2 = %d", n, len(m), 1<<(n+1)-2)
		}
		count := map[Transition]int{}
		rewards := 0
		for _, tr := range m {
			count[tr]++
			if tr.Reward != 0 {
				rewards++
			}
		}
		if len(count) != 2*n {
			t.Errorf("n=%d: %d distinct transitions, want 2n = %d", n, len(count), 2*n)
		}
		if rewards != 1 {
			t.Errorf("n=%d: %d rewarding transitions, want 1", n, rewards)
		}
		for s := range n {
			want := 1 << (n - 1 - s)
			right, wrong := env.Step(s, env.Right(s)), env.Step(s, 1-env.Right(s))
			if count[right] != want || count[wrong] != want {
				t.Errorf("n=%d s=%d: right x%d, wrong x%d, want x%d each", n, s, count[right], count[wrong], want)
			}
			if !wrong.Terminal() || wrong.Reward != 0 {
				t.Errorf("n=%d s=%d: wrong action gives %+v, want terminal with reward 0", n, s, wrong)
			}
			if s < n-1 && (right.Terminal() || right.Next != s+1 || right.Reward != 0) {
				t.Errorf("n=%d s=%d: right action gives %+v", n, s, right)
			}
		}
		if last := env.Step(n-1, env.Right(n-1)); !last.Terminal() || last.Reward != 1 {
			t.Errorf("n=%d: final right action gives %+v, want terminal with reward 1", n, last)
		}
		if env.Right(0) == env.Right(1%n) && n > 1 {
			t.Errorf("n=%d: right action does not alternate", n)
		}
	}
	for _, n := range []int{0, MaxN + 1} {
		if _, err := NewEnv(n); err == nil {
			t.Errorf("NewEnv(%d) accepted", n)
		}
	}
}

func TestQStar(t *testing.T) {
	for _, n := range []int{1, 2, 5, 12} {
		env, _ := NewEnv(n)
		if g := env.Gamma(); g != 1-1/float64(n) {
			t.Fatalf("n=%d: gamma %v", n, g)
		}
		qs := env.QStar()
		for s := range n {
			want := math.Pow(1-1/float64(n), float64(n-1-s))
			if got := qs[Index(s, env.Right(s))]; math.Abs(got-want) > 1e-15 {
				t.Errorf("n=%d: Q*(s%d, right) = %v, want gamma^%d = %v", n, s, got, n-1-s, want)
			}
			if got := qs[Index(s, 1-env.Right(s))]; got != 0 {
				t.Errorf("n=%d: Q*(s%d, wrong) = %v, want 0", n, s, got)
			}
		}
		if qs[Index(n-1, env.Right(n-1))] != 1 {
			t.Errorf("n=%d: Q* of the final right action is not 1", n)
		}
		// Q* is the fixed point: every stored transition has TD error 0.
		for _, tr := range env.Memory() {
			if d := env.TD(qs, tr); math.Abs(d) > 1e-15 {
				t.Fatalf("n=%d: TD(Q*, %+v) = %v", n, tr, d)
			}
		}
	}
}

// The buffer round trip: slot i holds memory item i, and decoding a
// gathered row gives it back.
func TestBufferHoldsMemory(t *testing.T) {
	for _, n := range []int{1, 3, 6} {
		task, err := NewTask(n, 0.25, 1e-3, 10)
		if err != nil {
			t.Fatal(err)
		}
		buf, err := NewBuffer(task)
		if err != nil {
			t.Fatal(err)
		}
		b, err := buf.NewBatch(1)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range task.Memory {
			if !buf.GatherSlot(b, 0, i) {
				t.Fatalf("n=%d: slot %d unreadable", n, i)
			}
			if got := decode(&b.Transitions, 0); got != want {
				t.Fatalf("n=%d: slot %d decodes to %+v, want %+v", n, i, got, want)
			}
			wantDisc := float32(0)
			if !want.Terminal() {
				wantDisc = float32(task.Env.Gamma())
			}
			if b.Discount[0] != wantDisc {
				t.Fatalf("n=%d: slot %d discount %v, want %v", n, i, b.Discount[0], wantDisc)
			}
			if _, p, _ := buf.SlotPriority(i); p != buf.MaxPriority() {
				t.Fatalf("n=%d: slot %d priority %v, want the maximum %v", n, i, p, buf.MaxPriority())
			}
		}
	}
}

// countingSelector wraps a Selector and counts Sample calls.
type countingSelector struct {
	sampler.Selector
	samples *int
}

func (c countingSelector) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	*c.samples++
	return c.Selector.Sample(rng, dst)
}

func TestStopRule(t *testing.T) {
	task, err := NewTask(4, 0.25, 1e-3, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	samples := 0
	agent := Replay{Label: "counting", New: func(buf *buffer.Buffer, _ int64) (sampler.Selector, error) {
		return countingSelector{sampler.NewUniform(buf), &samples}, nil
	}}
	rng := rand.New(rand.NewPCG(1, 2))

	// Already at Q*: no update.
	out, err := agent.Learn(task, append(Table(nil), task.QStar...), rng)
	if err != nil || out.Updates != 0 || out.Capped || samples != 0 {
		t.Fatalf("from Q*: %+v, %v, %d samples; want 0 updates, no samples", out, err, samples)
	}

	// MSE exactly at the threshold is not below it: learning goes on.
	q := append(Table(nil), task.QStar...)
	q[0] += math.Sqrt(task.Threshold * float64(len(q)))
	if m := MSE(q, task.QStar); math.Abs(m-task.Threshold) > 1e-12 {
		t.Fatalf("setup: MSE %v", m)
	}
	q[0] += 1e-9
	out, err = agent.Learn(task, q, rng)
	if err != nil || out.Updates == 0 || out.Capped {
		t.Fatalf("at the threshold: %+v, %v", out, err)
	}
	if !(out.MSE < task.Threshold) || MSE(q, task.QStar) != out.MSE {
		t.Fatalf("stopped at MSE %v (table: %v), want < %v", out.MSE, MSE(q, task.QStar), task.Threshold)
	}
	if int64(samples) != out.Updates {
		t.Fatalf("%d samples for %d updates", samples, out.Updates)
	}

	// The update that crossed the threshold is the last one: one fewer
	// update leaves the MSE at or above it.
	q0 := InitialTable(task.Env, 0.1, 7, 4, 0)
	full, err := agent.Learn(task, append(Table(nil), q0...), rand.New(rand.NewPCG(3, 4)))
	if err != nil || full.Capped {
		t.Fatal(full, err)
	}
	short := *task
	short.MaxUpdates = full.Updates - 1
	cut, err := agent.Learn(&short, append(Table(nil), q0...), rand.New(rand.NewPCG(3, 4)))
	if err != nil || !cut.Capped || cut.Updates != full.Updates-1 || cut.MSE < task.Threshold {
		t.Fatalf("one update short: %+v, %v (full run %+v)", cut, err, full)
	}

	// The oracle obeys the same rule.
	o, err := Oracle{}.Learn(task, append(Table(nil), q0...), nil)
	if err != nil || o.Capped || !(o.MSE < task.Threshold) || o.Updates == 0 {
		t.Fatalf("oracle: %+v, %v", o, err)
	}
	short.MaxUpdates = o.Updates - 1
	if c, _ := (Oracle{}).Learn(&short, append(Table(nil), q0...), nil); !c.Capped || c.MSE < task.Threshold {
		t.Fatalf("oracle one update short: %+v", c)
	}
}

func TestOracleBeatsRandomOrder(t *testing.T) {
	// The oracle picks, each step, the update that most reduces the loss;
	// it never needs more updates than uniform replay on the same start.
	for n := 2; n <= 6; n++ {
		task, _ := NewTask(n, 0.25, 1e-3, 1_000_000)
		for k := range 3 {
			q0 := InitialTable(task.Env, 0.1, 1, n, k)
			o, _ := Oracle{}.Learn(task, append(Table(nil), q0...), nil)
			u, _ := Uniform().Learn(task, append(Table(nil), q0...), rand.New(rand.NewPCG(uint64(k), 9)))
			if o.Updates > u.Updates {
				t.Errorf("n=%d seed %d: oracle %d updates, uniform %d", n, k, o.Updates, u.Updates)
			}
		}
	}
}

func smokeConfig() Config {
	cfg := DefaultConfig()
	cfg.NMin, cfg.NMax, cfg.Seeds = 2, 7, 3
	cfg.MaxUpdates = 200_000
	return cfg
}

func TestDeterministic(t *testing.T) {
	cfg := smokeConfig()
	cfg.NMax = 4
	a, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Rows, b.Rows) {
		t.Fatalf("seed %d: two runs differ:\n%+v\n%+v", cfg.Seed, a.Rows, b.Rows)
	}
	cfg.Seed++
	c, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a.Rows, c.Rows) {
		t.Fatalf("seeds %d and %d give identical results", cfg.Seed-1, cfg.Seed)
	}
}

// TestSmoke is a reduced Figure 1 (n = 2..7, 3 seeds). At the largest n,
// prioritized replay needs fewer updates than uniform replay and the oracle
// fewest of all. The one exception is proportional PER with its
// buffer-normalised importance weights: they shrink the steps on exactly
// the high-priority transitions, and it only overtakes uniform replay from
// n = 11 in the full sweep. The test pins that down too: the weighted
// variant needs more updates than the unweighted one.
func TestSmoke(t *testing.T) {
	cfg := smokeConfig()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var tbl bytes.Buffer
	if err := WriteTable(&tbl, res); err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d:\n%s", cfg.Seed, tbl.String())
	last := res.Rows[len(res.Rows)-1]
	med := map[string]float64{}
	for _, c := range last.Cells {
		if c.Skipped || c.Capped > 0 || len(c.Updates) != cfg.Seeds {
			t.Fatalf("n=%d %s: %+v", last.N, c.Agent, c)
		}
		med[c.Agent] = c.Median
	}
	if len(med) != 6 {
		t.Fatalf("agents %v, want the 6 defaults", res.Agents)
	}
	for _, name := range []string{"prop", "rank", "rank+IS", "oracle"} {
		if !(med[name] < med["uniform"]) {
			t.Errorf("n=%d: %s needs a median of %v updates, uniform %v; want fewer", last.N, name, med[name], med["uniform"])
		}
	}
	for name, m := range med {
		if name != "oracle" && !(med["oracle"] < m) {
			t.Errorf("n=%d: oracle median %v, %s %v; want the oracle fastest", last.N, med["oracle"], name, m)
		}
	}
	for _, v := range []string{"prop", "rank"} {
		if !(med[v+"+IS"] > med[v]) {
			t.Errorf("n=%d: %s with importance weights %v, without %v; want the weights to slow it", last.N, v, med[v+"+IS"], med[v])
		}
	}
}

func TestRankSegments(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 1}, {6, 3}, {62, 8}, {2046, 30}, {8190, 32}, {1 << 20, 32}} {
		if got := RankSegments(c.n, 0.7); got != c.want {
			t.Errorf("RankSegments(%d, 0.7) = %d, want %d", c.n, got, c.want)
		}
	}
	// Every segment can hold mass 1/k: the top-ranked item alone weighs at
	// most that.
	z := 0.0
	for n := 1; n <= 5000; n++ {
		z += math.Pow(float64(n), -0.7)
		if n%37 != 1 {
			continue
		}
		if k := RankSegments(n, 0.7); 1/z > 1/float64(k)+1e-12 {
			t.Fatalf("n=%d: k=%d but P(rank 1) = %v > 1/k", n, k, 1/z)
		}
	}
}

func TestOracleCutoffAndOutputs(t *testing.T) {
	cfg := smokeConfig()
	cfg.NMax, cfg.OracleMaxN, cfg.Seeds = 4, 3, 2
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rows {
		for _, c := range r.Cells {
			if want := c.Agent == "oracle" && r.N > 3; c.Skipped != want {
				t.Errorf("n=%d %s: skipped %v, want %v", r.N, c.Agent, c.Skipped, want)
			}
		}
	}
	dir := t.TempDir()
	if err := WriteJSON(res, filepath.Join(dir, "c.json")); err != nil {
		t.Fatal(err)
	}
	if err := SavePlot(res, filepath.Join(dir, "c.png")); err != nil {
		t.Fatal(err)
	}
	png, err := os.ReadFile(filepath.Join(dir, "c.png"))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("plot: %v, %d bytes", err, len(png))
	}
	js, _ := os.ReadFile(filepath.Join(dir, "c.json"))
	if !strings.Contains(string(js), `"Memory": 30`) {
		t.Fatalf("json lacks the n=4 row:\n%s", js)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"n-min 0":       func(c *Config) { c.NMin = 0 },
		"n-max < n-min": func(c *Config) { c.NMin, c.NMax = 5, 4 },
		"n-max too big": func(c *Config) { c.NMax = MaxN + 1 },
		"seeds":         func(c *Config) { c.Seeds = 0 },
		"cap":           func(c *Config) { c.MaxUpdates = 0 },
		"eta":           func(c *Config) { c.Eta = 0 },
		"threshold":     func(c *Config) { c.Threshold = math.NaN() },
		"oracle":        func(c *Config) { c.OracleMaxN = -1 },
		"beta steps":    func(c *Config) { c.BetaSteps = -1 },
		"rank refresh":  func(c *Config) { c.RankRefresh = -0.1 },
		"refresh NaN":   func(c *Config) { c.RankRefresh = math.NaN() },
		"agents":        func(c *Config) { c.Agents = nil },
		"duplicate":     func(c *Config) { c.Agents = []Agent{Oracle{}, Oracle{}} },
	} {
		cfg := DefaultConfig()
		mut(&cfg)
		if cfg.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestRankRefresh: the rank agents' re-sort fraction reaches their stage:
// re-sorting after every change and after a pass of changes give different
// update counts, the default gives the committed 0.1's, and the other
// agents do not depend on it.
func TestRankRefresh(t *testing.T) {
	cfg := smokeConfig()
	cfg.NMin, cfg.NMax, cfg.Seeds, cfg.OracleMaxN = 6, 6, 2, 0
	cells := func(refresh float64) map[string][]int64 {
		c := cfg
		c.RankRefresh = refresh
		res, err := Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]int64{}
		for _, cell := range res.Rows[0].Cells {
			out[cell.Agent] = cell.Updates
		}
		return out
	}
	def, every, pass := cells(RankRefreshFraction), cells(0), cells(1)
	if cfg.RankRefresh != RankRefreshFraction {
		t.Fatalf("default RankRefresh %v, want %v", cfg.RankRefresh, RankRefreshFraction)
	}
	for _, name := range []string{"uniform", "prop", "prop+IS"} {
		if !reflect.DeepEqual(def[name], every[name]) || !reflect.DeepEqual(def[name], pass[name]) {
			t.Errorf("%s depends on the rank refresh: %v, %v, %v", name, def[name], every[name], pass[name])
		}
	}
	if reflect.DeepEqual(every["rank"], pass["rank"]) {
		t.Errorf("rank: refresh 0 and 1 give the same updates %v", every["rank"])
	}
}

// TestRunStopped: a sweep whose context ends keeps the rows that finished,
// says it is incomplete and lists the chain lengths that did not finish.
func TestRunStopped(t *testing.T) {
	cfg := smokeConfig()
	cfg.NMax = 5
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.OnRow = func(r Row) {
		if r.N == 3 {
			cancel()
		}
	}
	res, err := Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	if res == nil || res.Status != StatusIncomplete || len(res.Rows) != 2 || res.Rows[1].N != 3 || !reflect.DeepEqual(res.Unfinished, []int{4, 5}) {
		t.Fatalf("result %+v, want rows n=2,3 and n=4,5 unfinished", res)
	}
	cfg.OnRow = nil
	full, err := Run(context.Background(), cfg)
	if err != nil || full.Status != StatusComplete || full.Unfinished != nil || !reflect.DeepEqual(full.Rows[:2], res.Rows) {
		t.Fatalf("complete run %+v, %v: want the stopped run's rows as its first two", full, err)
	}
}
