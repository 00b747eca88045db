package bench

import (
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
)

// transitionBytes is the payload of one benchmark transition: two
// observations of ObsDim float32, an int32 action, a float32 reward and a
// float32 discount.
const transitionBytes = 2*ObsDim*4 + 3*4

// prefillBatch is the batch size used to fill a backend before timing.
const prefillBatch = 1024

// apexBackend drives a buffer.Buffer.
type apexBackend struct {
	buf *buffer.Buffer
}

var _ backend[*buffer.Transitions] = (*apexBackend)(nil)

func newApexBackend(cfg Config) (*apexBackend, error) {
	buf, err := buffer.New(cfg.apexConfig())
	if err != nil {
		return nil, err
	}
	return &apexBackend{buf: buf}, nil
}

func (a *apexBackend) describe() Result {
	return Result{Backend: "apex", Stripes: a.buf.Config().Stripes, GenerationsTracked: true}
}

func (a *apexBackend) newActorBatch(n int) *buffer.Transitions {
	return &buffer.Transitions{
		Obs:      make([]float32, n*ObsDim),
		NextObs:  make([]float32, n*ObsDim),
		Action:   make([]int32, n),
		Reward:   make([]float32, n),
		Discount: make([]float32, n),
	}
}

// fill writes CartPole-like values; what they are does not matter, only
// that every byte of every transition is written, as an actor would.
func (a *apexBackend) fill(t *buffer.Transitions, seq uint64) {
	for i := range t.Reward {
		x := float32((seq+uint64(i))&1023) * (1.0 / 1024)
		o := t.Obs[i*ObsDim : i*ObsDim+ObsDim]
		o[0], o[1], o[2], o[3] = x, -x, 0.5*x, 0.25*x
		o = t.NextObs[i*ObsDim : i*ObsDim+ObsDim]
		o[0], o[1], o[2], o[3] = x+0.01, -x, 0.5*x, 0.25*x
		t.Action[i] = int32((seq + uint64(i)) & 1)
		t.Reward[i] = 1
		t.Discount[i] = 0.99
	}
}

func (a *apexBackend) insert(t *buffer.Transitions) error { return a.buf.Insert(t) }

func (a *apexBackend) prefill(tab *prioTable) error {
	n := min(prefillBatch, a.buf.Capacity())
	t := a.newActorBatch(n)
	t.Priority = make([]float64, n)
	capacity := a.buf.Capacity()
	for seq, off := uint64(0), 0; a.buf.Size() < capacity; seq += uint64(n) {
		a.fill(t, seq)
		off = tab.fillPrefill(t.Priority, off)
		if err := a.buf.Insert(t); err != nil {
			return err
		}
	}
	return nil
}

func (a *apexBackend) counters() counters {
	st := a.buf.Stats()
	return counters{stale: st.StaleUpdates, torn: st.TornReads, fallbacks: st.StratumFallbacks}
}

func (a *apexBackend) newLearner(n int, seed uint64) (learner, error) {
	batch, err := a.buf.NewBatch(n)
	if err != nil {
		return nil, err
	}
	return &apexLearner{buf: a.buf, batch: batch, rng: rand.New(rand.NewPCG(seed, 1))}, nil
}

type apexLearner struct {
	buf   *buffer.Buffer
	batch *buffer.Batch
	rng   *rand.Rand
}

func (l *apexLearner) step(prios []float64) (applied, stale int, err error) {
	if err := l.buf.Sample(l.rng, l.batch); err != nil {
		return 0, 0, err
	}
	r, err := l.buf.UpdatePriorities(l.batch.Refs, prios)
	return r.Applied, r.Stale, err
}

// baselineBackend drives a Baseline.
type baselineBackend struct {
	b *Baseline
}

var _ backend[[]Transition] = (*baselineBackend)(nil)

func newBaselineBackend(cfg Config) *baselineBackend {
	return &baselineBackend{b: NewBaseline(cfg.Capacity)}
}

func (bb *baselineBackend) describe() Result {
	return Result{Backend: "mutex-baseline", GenerationsTracked: false}
}

func (bb *baselineBackend) newActorBatch(n int) []Transition { return make([]Transition, n) }

// fill writes the same values as apexBackend.fill.
func (bb *baselineBackend) fill(ts []Transition, seq uint64) {
	for i := range ts {
		x := float32((seq+uint64(i))&1023) * (1.0 / 1024)
		t := &ts[i]
		t.Obs = [4]float32{x, -x, 0.5 * x, 0.25 * x}
		t.NextObs = [4]float32{x + 0.01, -x, 0.5 * x, 0.25 * x}
		t.Action = int32((seq + uint64(i)) & 1)
		t.Reward = 1
		t.Discount = 0.99
	}
}

func (bb *baselineBackend) insert(ts []Transition) error {
	bb.b.Insert(ts, nil)
	return nil
}

func (bb *baselineBackend) prefill(tab *prioTable) error {
	capacity := bb.b.Capacity()
	n := min(prefillBatch, capacity)
	ts := make([]Transition, n)
	prios := make([]float64, n)
	for seq, off := uint64(0), 0; bb.b.Size() < capacity; seq += uint64(n) {
		bb.fill(ts, seq)
		off = tab.fillPrefill(prios, off)
		bb.b.Insert(ts, prios)
	}
	return nil
}

func (bb *baselineBackend) counters() counters { return counters{} }

func (bb *baselineBackend) newLearner(n int, seed uint64) (learner, error) {
	return &baselineLearner{b: bb.b, batch: NewBaselineBatch(n), rng: rand.New(rand.NewPCG(seed, 1))}, nil
}

type baselineLearner struct {
	b     *Baseline
	batch *BaselineBatch
	rng   *rand.Rand
}

func (l *baselineLearner) step(prios []float64) (applied, stale int, err error) {
	if err := l.b.Sample(l.rng, l.batch); err != nil {
		return 0, 0, err
	}
	l.b.UpdatePriorities(l.batch.Index, prios)
	return len(prios), 0, nil
}
