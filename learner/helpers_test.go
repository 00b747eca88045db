package learner

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// benchCfg is the design notes' reference network: CartPole-sized
// 4→64→64→2 (ReLU).
var benchCfg = model.Config{In: 4, Hidden: []int{64, 64}, Out: 2}

// linearNet returns an in→out network with no hidden layer holding params:
// W (in×out, row-major) then b, so Q(x)[a] = Σ_i x_i·W[i,a] + b[a].
func linearNet(t testing.TB, in, out int, params []float64) *model.Net {
	t.Helper()
	net, err := model.NewNet(model.Config{In: in, Out: out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	setParams(t, net, params)
	return net
}

func setParams(t testing.TB, net *model.Net, params []float64) {
	t.Helper()
	if err := net.SetParams(model.NewParams(0, params)); err != nil {
		t.Fatal(err)
	}
}

// item is one transition of a test: Reward is the n-step return and
// Discount γ^m (0 at a termination), as an n-step adder stores them.
type item struct {
	obs, next []float32
	a         int32
	r, d      float32
}

func newBuffer(t testing.TB, capacity, obsDim int) *buffer.Buffer {
	t.Helper()
	buf, err := buffer.New(buffer.Config{Capacity: capacity, ObsDim: obsDim})
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

// insert stores items (with the buffer's maximum priority).
func insert(t testing.TB, buf *buffer.Buffer, items ...item) {
	t.Helper()
	var tr buffer.Transitions
	for _, it := range items {
		tr.Obs = append(tr.Obs, it.obs...)
		tr.NextObs = append(tr.NextObs, it.next...)
		tr.Action = append(tr.Action, it.a)
		tr.Reward = append(tr.Reward, it.r)
		tr.Discount = append(tr.Discount, it.d)
	}
	if err := buf.Insert(&tr); err != nil {
		t.Fatal(err)
	}
}

// randomTransitions returns n random transitions of width obsDim with nA
// actions; one in ten is terminal, the others 3-step with γ = 0.99.
func randomTransitions(rng *rand.Rand, n, obsDim, nA int) *buffer.Transitions {
	tr := &buffer.Transitions{
		Obs:      make([]float32, n*obsDim),
		NextObs:  make([]float32, n*obsDim),
		Action:   make([]int32, n),
		Reward:   make([]float32, n),
		Discount: make([]float32, n),
	}
	for i := range n {
		for j := range obsDim {
			tr.Obs[i*obsDim+j] = float32(rng.NormFloat64())
			tr.NextObs[i*obsDim+j] = float32(rng.NormFloat64())
		}
		tr.Action[i] = int32(rng.IntN(nA))
		tr.Reward[i] = float32(rng.Float64())
		if rng.IntN(10) != 0 {
			tr.Discount[i] = 0.99 * 0.99 * 0.99
		}
	}
	return tr
}

// fillRandom inserts n random transitions (randomTransitions).
func fillRandom(t testing.TB, buf *buffer.Buffer, rng *rand.Rand, n, obsDim, nA int) {
	t.Helper()
	for n > 0 {
		k := min(n, 256)
		if err := buf.Insert(randomTransitions(rng, k, obsDim, nA)); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
}

// rig is a learner over a reference network and a PER stage on a buffer
// of random transitions.
type rig struct {
	buf   *buffer.Buffer
	per   *sampler.PER
	store *model.Store
	l     *DQN
}

func newRig(t testing.TB, cfg DQNConfig, netCfg model.Config, items int) *rig {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	net, err := model.NewNet(netCfg, rng)
	if err != nil {
		t.Fatal(err)
	}
	buf := newBuffer(t, max(items, 1024), netCfg.In)
	fillRandom(t, buf, rng, items, netCfg.In, netCfg.Out)
	per, err := sampler.NewPER(buf, sampler.DefaultPERConfig(10_000))
	if err != nil {
		t.Fatal(err)
	}
	store := new(model.Store)
	l, err := NewDQN(cfg, net, buf, method("per", per, per), store)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{buf: buf, per: per, store: store, l: l}
}

func params(n *model.Net) []float64 { return slices.Clone(n.Params()) }

// method pairs a stage built by hand with the default loss (Huber(1)).
func method(name string, sel sampler.Selector, w sampler.Weighter) sampler.Method {
	return sampler.Method{Name: name, Selector: sel, Weighter: w}
}

// checkGradFD compares grad, the gradient at parameters p0 of net, with
// central finite differences of lossAt (step 1e-6, tolerance 1e-7 +
// 1e-5·|fd|), and fails if the gradient is too small to test.
func checkGradFD(t *testing.T, net *model.Net, p0, grad []float64, lossAt func([]float64) float64) {
	t.Helper()
	const h = 1e-6
	var maxAbs float64
	for i := range p0 {
		p := slices.Clone(p0)
		p[i] = p0[i] + h
		up := lossAt(p)
		p[i] = p0[i] - h
		down := lossAt(p)
		fd := (up - down) / (2 * h)
		maxAbs = max(maxAbs, math.Abs(fd))
		if math.Abs(fd-grad[i]) > 1e-7+1e-5*math.Abs(fd) {
			t.Errorf("param %d (%s): gradient %.10g, finite difference %.10g", i, net.Where(i), grad[i], fd)
		}
	}
	if maxAbs < 1e-3 {
		t.Fatalf("the gradient is too small to test (max |g| = %v)", maxAbs)
	}
}
