package sampler_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// terStep is one transition of a test task with discrete states.
type terStep struct {
	s, s2 uint64
	a     int32
	r     float32
	flags uint32
}

// terBuffer is a buffer for TER tests: 2-wide observations, discrete
// actions, state hashes.
func terBuffer(t testing.TB, capacity, stripes int) *buffer.Buffer {
	t.Helper()
	b, err := buffer.New(buffer.Config{Capacity: capacity, Stripes: stripes, ObsDim: 2, StateHash: true})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// terTransitions encodes steps with ids id0, id0+1, ...: Obs = (id, s),
// NextObs = (id, s'), so a torn row shows as disagreeing columns
// (checkTERRow).
func terTransitions(id0 int, steps []terStep) *buffer.Transitions {
	n := len(steps)
	t := &buffer.Transitions{
		Obs: make([]float32, 2*n), NextObs: make([]float32, 2*n),
		Action: make([]int32, n), Reward: make([]float32, n), Discount: make([]float32, n), Flags: make([]uint32, n),
		StateHash: make([]uint64, n), NextStateHash: make([]uint64, n),
	}
	for i, st := range steps {
		id := float32(id0 + i)
		t.Obs[2*i], t.Obs[2*i+1] = id, float32(st.s)
		t.NextObs[2*i], t.NextObs[2*i+1] = id, float32(st.s2)
		t.Action[i], t.Reward[i], t.Flags[i] = st.a, st.r, st.flags
		t.StateHash[i], t.NextStateHash[i] = st.s, st.s2
		t.Discount[i] = 0.99
		if st.flags&buffer.FlagTerminal != 0 {
			t.Discount[i] = 0
		}
	}
	return t
}

func terInsert(t testing.TB, buf *buffer.Buffer, id0 int, steps []terStep) {
	t.Helper()
	if err := buf.Insert(terTransitions(id0, steps)); err != nil {
		t.Fatal(err)
	}
}

// checkTERRow reports a row whose columns disagree (a torn read).
func checkTERRow(b *buffer.Batch, row int) error {
	if b.Obs[2*row] != b.NextObs[2*row] || b.Obs[2*row+1] != float32(b.StateHash[row]) || b.NextObs[2*row+1] != float32(b.NextStateHash[row]) {
		return fmt.Errorf("row %d torn: obs %v next %v hashes %d→%d", row, b.Obs[2*row:2*row+2], b.NextObs[2*row:2*row+2], b.StateHash[row], b.NextStateHash[row])
	}
	return nil
}

// terWalk is a random walk on a fixed random graph: states 0..n-1, three
// actions with fixed random successors, states 0 and 1 terminal, a time
// limit; episodes restart at a random non-terminal state.
type terWalk struct {
	succ   [][3]uint64
	s      uint64
	t, lim int
	rng    *rand.Rand
}

func newTERWalk(graphSeed, walkSeed uint64, n, limit int) *terWalk {
	g := rand.New(rand.NewPCG(graphSeed, 1))
	w := &terWalk{succ: make([][3]uint64, n), lim: limit, rng: rand.New(rand.NewPCG(walkSeed, 2))}
	for s := range w.succ {
		for a := range 3 {
			w.succ[s][a] = uint64(g.IntN(n))
		}
	}
	w.reset()
	return w
}

func terTerminal(s uint64) bool { return s < 2 }

func (w *terWalk) reset() { w.s, w.t = 2+uint64(w.rng.IntN(len(w.succ)-2)), 0 }

func (w *terWalk) step() terStep {
	a := w.rng.IntN(3)
	st := terStep{s: w.s, s2: w.succ[w.s][a], a: int32(a)}
	w.t++
	switch {
	case terTerminal(st.s2):
		st.flags, st.r = buffer.FlagTerminal, 1
		w.reset()
	case w.t == w.lim:
		st.flags = buffer.FlagTruncated
		w.reset()
	default:
		w.s = st.s2
	}
	return st
}

func (w *terWalk) steps(n int) []terStep {
	out := make([]terStep, n)
	for i := range out {
		out[i] = w.step()
	}
	return out
}

func newTER(t testing.TB, buf *buffer.Buffer, cfg sampler.TERConfig) *sampler.TER {
	t.Helper()
	s, err := sampler.NewTER(buf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTERConfigErrors(t *testing.T) {
	buf := terBuffer(t, 16, 0)
	for name, mod := range map[string]func(*sampler.TERConfig){
		"eta<0":    func(c *sampler.TERConfig) { c.Eta = -0.1 },
		"eta>1":    func(c *sampler.TERConfig) { c.Eta = 1.5 },
		"eta NaN":  func(c *sampler.TERConfig) { c.Eta = math.NaN() },
		"roots 0":  func(c *sampler.TERConfig) { c.Roots = 0 },
		"preds 0":  func(c *sampler.TERConfig) { c.Preds = -1 },
		"fallback": func(c *sampler.TERConfig) { c.NoTerminalFallback = 9 },
		"per":      func(c *sampler.TERConfig) { c.PER.Alpha = -1 },
	} {
		c := sampler.DefaultTERConfig(10)
		mod(&c)
		if err := c.Validate(); !errors.Is(err, buffer.ErrConfig) {
			t.Errorf("%s: Validate: %v, want ErrConfig", name, err)
		}
		if _, err := sampler.NewTER(buf, c); !errors.Is(err, buffer.ErrConfig) {
			t.Errorf("%s: NewTER: %v, want ErrConfig", name, err)
		}
	}
	def := sampler.DefaultTERConfig(10)
	if err := def.Validate(); err != nil {
		t.Fatal(err)
	}
	if def.Eta != 0.5 || def.Roots != 8 || def.Preds != 3 || def.EdgeAction || def.NoTerminalFallback != sampler.TERRandomRoots {
		t.Errorf("DefaultTERConfig: %+v", def)
	}
	bad := func(name string, cfg buffer.Config, c sampler.TERConfig, want string) {
		b, err := buffer.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sampler.NewTER(b, c); !errors.Is(err, buffer.ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrConfig naming %q", name, err, want)
		}
	}
	bad("no state hash", buffer.Config{Capacity: 8, ObsDim: 1}, def, "StateHash")
	ea := def
	ea.EdgeAction = true
	bad("edge action, continuous", buffer.Config{Capacity: 8, ObsDim: 1, Action: buffer.Continuous, ActionDim: 2, StateHash: true}, ea, "EdgeAction")
	bad("no min tree", buffer.Config{Capacity: 8, ObsDim: 1, StateHash: true, NoMinTree: true}, def, "min tree")
	if _, err := sampler.NewTER(nil, def); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("nil buffer: %v", err)
	}
}

func TestTERPERRows(t *testing.T) {
	for _, c := range []struct {
		eta  float64
		b    int
		want int
	}{{0.5, 64, 32}, {0.5, 7, 3}, {0.3, 10, 3}, {0.1, 32, 3}, {0.2, 32, 6}, {0, 16, 0}, {1, 16, 16}, {0.7, 10, 7}, {0.999, 10, 9}} {
		cfg := sampler.TERConfig{Eta: c.eta}
		if got := cfg.PERRows(c.b); got != c.want {
			t.Errorf("PERRows(eta=%v, B=%d) = %d, want %d", c.eta, c.b, got, c.want)
		}
	}
}

// TestTERPERShare: rows [0, floor(eta·B)) come from PER, the rest from the
// sweep, on every batch, while the graph can supply them.
func TestTERPERShare(t *testing.T) {
	const seed = 11
	for _, c := range []struct {
		eta float64
		b   int
	}{{0.5, 32}, {0.3, 10}, {0.1, 31}, {0, 8}, {1, 8}, {0.75, 5}} {
		buf := terBuffer(t, 512, 4)
		terInsert(t, buf, 0, newTERWalk(seed, seed, 30, 20).steps(512))
		cfg := sampler.DefaultTERConfig(100)
		cfg.Eta = c.eta
		s := newTER(t, buf, cfg)
		rng := rand.New(rand.NewPCG(seed, 3))
		bt := samplertest.NewBatch(t, buf, c.b)
		want := int(math.Floor(c.eta*float64(c.b) + 1e-9))
		for round := range 50 {
			if err := s.Sample(rng, bt); err != nil {
				t.Fatalf("seed %d eta %v B %d round %d: %v", seed, c.eta, c.b, round, err)
			}
			for j := range c.b {
				if s.FromSweep(j) != (j >= want) {
					t.Fatalf("seed %d eta %v B %d round %d: row %d FromSweep=%v, want PER rows [0,%d)", seed, c.eta, c.b, round, j, s.FromSweep(j), want)
				}
				if err := checkTERRow(bt, j); err != nil {
					t.Fatal(err)
				}
			}
		}
		if st := s.Stats(); st.Fallbacks != 0 {
			t.Errorf("eta %v: %d fallbacks with a full graph", c.eta, st.Fallbacks)
		}
	}
}

func TestTERConformance(t *testing.T) {
	// The sweep rows ignore priorities, so the priority-only subtests
	// (ZeroPriorityNeverSampled, AllZeroPriorities) do not apply.
	for _, eta := range []float64{0.5, 0} {
		t.Run(fmt.Sprintf("eta=%v", eta), func(t *testing.T) {
			cfg := sampler.DefaultTERConfig(100)
			cfg.Eta = eta
			samplertest.Run(t, func(t *testing.T, buf *buffer.Buffer) sampler.Selector {
				return newTER(t, buf, cfg)
			}, samplertest.Options{StateHash: true})
		})
	}
}

// TestTERFallbacks: before any terminal, TERPEROnly fills the batch from
// PER (counted) and TERRandomRoots sweeps from random vertices; once a
// terminal exists, sweeps start from it.
func TestTERFallbacks(t *testing.T) {
	const seed = 5
	chain := func(n int) []terStep { // 10→11→...: no terminal
		out := make([]terStep, n)
		for i := range out {
			out[i] = terStep{s: uint64(10 + i), s2: uint64(11 + i)}
		}
		return out
	}
	for _, fb := range []sampler.TERFallback{sampler.TERPEROnly, sampler.TERRandomRoots} {
		t.Run(fb.String(), func(t *testing.T) {
			buf := terBuffer(t, 64, 2)
			terInsert(t, buf, 0, chain(20))
			cfg := sampler.DefaultTERConfig(0)
			cfg.Eta, cfg.NoTerminalFallback = 0.25, fb
			s := newTER(t, buf, cfg)
			var roots []uint64
			sampler.SetTERTrace(s, func(_, v uint64, root bool) {
				if root {
					roots = append(roots, v)
				}
			}, func(uint64, uint64, uint64, buffer.Ref) {})
			rng := rand.New(rand.NewPCG(seed, 1))
			bt := samplertest.NewBatch(t, buf, 8)
			for range 10 {
				if err := s.Sample(rng, bt); err != nil {
					t.Fatal(err)
				}
			}
			st := s.Stats()
			if fb == sampler.TERPEROnly {
				if st.Sweeps != 0 || st.Fallbacks != 10*6 {
					t.Fatalf("per-only without terminals: %+v", st)
				}
				for j := range 8 {
					if s.FromSweep(j) {
						t.Fatalf("row %d from a sweep", j)
					}
				}
			} else if st.Sweeps == 0 || st.Queued == 0 || st.Terminals != 0 {
				t.Fatalf("random roots without terminals: %+v", st)
			}
			// A terminal arrives: the next sweeps start from it alone.
			terInsert(t, buf, 20, []terStep{{s: 30, s2: 99, r: 1, flags: buffer.FlagTerminal}})
			sweeps := st.Sweeps
			for range 40 {
				if err := s.Sample(rng, bt); err != nil {
					t.Fatal(err)
				}
			}
			st = s.Stats()
			if st.Terminals != 1 || st.Sweeps <= sweeps+1 || roots[len(roots)-1] != 99 {
				t.Fatalf("seed %d: after a terminal: %+v, roots %v", seed, st, roots)
			}
			if err := sampler.CheckTERGraph(s); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestTERWeights: sweep rows weigh 1, PER rows get (N·P)^-beta normalised
// over the PER rows.
func TestTERWeights(t *testing.T) {
	const seed = 21
	for _, norm := range []buffer.Normalization{buffer.NormalizeBuffer, buffer.NormalizeBatch, buffer.NormalizeNone} {
		buf := terBuffer(t, 256, 4)
		w := newTERWalk(seed, seed, 20, 15)
		steps := w.steps(256)
		tr := terTransitions(0, steps)
		rng := rand.New(rand.NewPCG(seed, 4))
		tr.Priority = make([]float64, 256)
		for i := range tr.Priority {
			tr.Priority[i] = 0.1 + rng.Float64()
		}
		if err := buf.Insert(tr); err != nil {
			t.Fatal(err)
		}
		cfg := sampler.DefaultTERConfig(100)
		cfg.PER.Normalize = norm
		s := newTER(t, buf, cfg)
		bt := samplertest.NewBatch(t, buf, 16)
		for _, step := range []int64{0, 50, 1000} {
			if err := s.Sample(rng, bt); err != nil {
				t.Fatal(err)
			}
			if err := s.Weights(bt, step); err != nil {
				t.Fatal(err)
			}
			beta := cfg.PER.Beta.At(step)
			wmax := 0.0
			for j := range 8 {
				wmax = max(wmax, math.Pow(float64(bt.Size)*bt.Prob[j], -beta))
			}
			switch norm {
			case buffer.NormalizeBuffer:
				wmax = max(wmax, math.Pow(float64(bt.Size)*bt.MinProb, -beta))
			case buffer.NormalizeNone:
				wmax = 1
			}
			for j := range 16 {
				want := 1.0
				if j < 8 {
					want = math.Pow(float64(bt.Size)*bt.Prob[j], -beta) / wmax
				} else if bt.Prob[j] != 1/float64(bt.Size) {
					t.Fatalf("sweep row %d: Prob %v, want 1/Size", j, bt.Prob[j])
				}
				if math.Abs(bt.Weight[j]-want) > 1e-12 {
					t.Fatalf("%v step %d row %d: weight %v, want %v", norm, step, j, bt.Weight[j], want)
				}
			}
		}
		if err := s.Weights(samplertest.NewBatch(t, buf, 4), 0); !errors.Is(err, buffer.ErrShape) {
			t.Errorf("Weights of another batch: %v", err)
		}
	}
}

// TestTERMemoryBounded: with fresh states in every item, the graph never
// holds more transitions than the buffer has slots, nor more than two
// vertices per transition, with or without sweeps running (Eta = 1 runs
// none), and vertices left without transitions are freed.
func TestTERMemoryBounded(t *testing.T) {
	const seed, capacity = 3, 64
	for _, eta := range []float64{1, 0.5, 0} {
		buf := terBuffer(t, capacity, 4)
		cfg := sampler.DefaultTERConfig(0)
		cfg.Eta = eta
		s := newTER(t, buf, cfg)
		rng := rand.New(rand.NewPCG(seed, 1))
		bt := samplertest.NewBatch(t, buf, 8)
		for round := range 500 {
			steps := make([]terStep, 10)
			for i := range steps {
				id := uint64(10*round + i)
				steps[i] = terStep{s: 2 * id, s2: 2*id + 1}
				if i == 9 {
					steps[i].flags = buffer.FlagTerminal
				}
			}
			terInsert(t, buf, 10*round, steps)
			if buf.Size() < 8 {
				continue
			}
			if err := s.Sample(rng, bt); err != nil {
				t.Fatal(err)
			}
			st := s.Stats()
			if st.Transitions > capacity || st.Vertices > 2*capacity || st.Edges > capacity || sampler.TERDeadVertices(s) > 4*capacity {
				t.Fatalf("eta %v round %d: %+v, %d dead vertices", eta, round, st, sampler.TERDeadVertices(s))
			}
		}
		if err := sampler.CheckTERGraph(s); err != nil {
			t.Fatal(err)
		}
	}
}
