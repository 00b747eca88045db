package learner

import (
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// contBuffer returns an empty buffer of continuous actions.
func contBuffer(t testing.TB, capacity, obsDim, actDim int, initialPriority float64) *buffer.Buffer {
	t.Helper()
	buf, err := buffer.New(buffer.Config{Capacity: capacity, ObsDim: obsDim, Action: buffer.Continuous, ActionDim: actDim,
		InitialPriority: initialPriority})
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

// fillContinuous inserts n random transitions: Gaussian observations,
// actions uniform in [−maxA, maxA], rewards in [−1, 1], one in ten
// terminal and the others 1-step with γ = 0.99.
func fillContinuous(t testing.TB, buf *buffer.Buffer, rng *rand.Rand, n int, maxA float64) {
	t.Helper()
	c := buf.Config()
	tr := buffer.Transitions{
		Obs:       make([]float32, n*c.ObsDim),
		NextObs:   make([]float32, n*c.ObsDim),
		ActionVec: make([]float32, n*c.ActionDim),
		Reward:    make([]float32, n),
		Discount:  make([]float32, n),
	}
	for i := range tr.Obs {
		tr.Obs[i] = float32(rng.NormFloat64())
		tr.NextObs[i] = float32(rng.NormFloat64())
	}
	for i := range tr.ActionVec {
		tr.ActionVec[i] = float32(maxA * (2*rng.Float64() - 1))
	}
	for i := range n {
		tr.Reward[i] = float32(2*rng.Float64() - 1)
		if rng.IntN(10) != 0 {
			tr.Discount[i] = 0.99
		}
	}
	if err := buf.Insert(&tr); err != nil {
		t.Fatal(err)
	}
}

// td3Nets returns an actor (tanh output) and a critic for nS observations
// and nA actions, initialised from seed.
func td3Nets(t testing.TB, nS, nA int, hidden []int, act model.Activation, seed uint64) (actor, critic *model.Net) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	actor, err := model.NewNet(model.Config{In: nS, Hidden: hidden, Out: nA, Act: act, OutAct: model.Tanh}, rng)
	if err != nil {
		t.Fatal(err)
	}
	critic, err = model.NewNet(model.Config{In: nS + nA, Hidden: hidden, Out: 1, Act: act}, rng)
	if err != nil {
		t.Fatal(err)
	}
	return actor, critic
}

// td3Method builds the named method over buf (TD3's MSE for "uniform").
func td3Method(t testing.TB, name string, buf *buffer.Buffer, lap *sampler.LAPConfig) sampler.Method {
	t.Helper()
	cfg := sampler.MethodConfig{BetaSteps: 1000}
	if name == "lap" || name == "pal" {
		cfg.LAP = lap
	}
	if name == "uniform" || name == "per" {
		cfg.Loss = model.Loss{Kind: model.MSE}
	}
	m, err := sampler.NewMethod(name, buf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// td3Rig is a TD3 learner over a buffer of random transitions: 3
// observations, 2 actions, MaxAction 2.
type td3Rig struct {
	buf   *buffer.Buffer
	store *model.Store
	l     *TD3
}

const rigMaxA = 2

func newTD3Rig(t testing.TB, cfg TD3Config, method string, items int) *td3Rig {
	t.Helper()
	if cfg.MaxAction == 0 {
		cfg.MaxAction = rigMaxA
	}
	buf := contBuffer(t, max(items, 64), 3, 2, 0)
	fillContinuous(t, buf, rand.New(rand.NewPCG(11, 11)), items, cfg.MaxAction)
	actor, critic := td3Nets(t, 3, 2, []int{8}, model.ReLU, 5)
	store := new(model.Store)
	l, err := NewTD3(cfg, actor, critic, buf, td3Method(t, method, buf, nil), store)
	if err != nil {
		t.Fatal(err)
	}
	return &td3Rig{buf: buf, store: store, l: l}
}

func td3Steps(t testing.TB, l *TD3, n int) {
	t.Helper()
	for range n {
		if err := l.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// criticAt returns Q(x) for the rows of x on a clone of net (net's own
// buffers untouched).
func criticAt(net *model.Net, x []float64) []float64 {
	return append([]float64(nil), net.Clone().Forward(x)...)
}
