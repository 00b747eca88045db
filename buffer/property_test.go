package buffer

import (
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// model is the naive O(n) reference: a slice of slots, FIFO per stripe
// with round-robin stripe choice, exactly as documented on Insert.
type model struct {
	cfg     Config
	lay     layout
	q       quantizer
	next    int   // round-robin stripe counter
	cursor  []int // per stripe
	gen     []uint32
	units   []uint64
	id      []int
	maxU    uint64
	clamped int
}

func newModel(b *Buffer) *model {
	c := b.Config()
	m := &model{cfg: c, lay: newLayout(c.Capacity, c.Stripes), q: b.q,
		cursor: make([]int, c.Stripes), gen: make([]uint32, c.Capacity),
		units: make([]uint64, c.Capacity), id: make([]int, c.Capacity)}
	m.maxU, _ = m.q.units(c.InitialPriority)
	return m
}

func (m *model) insert(id0 int, prios []float64, n int) {
	for done := 0; done < n; {
		s := m.next % m.cfg.Stripes
		m.next++
		sc := m.lay.stripeCap(s)
		k := min(n-done, sc)
		for x := range k {
			slot := m.lay.stripeOffset(s) + (m.cursor[s]+x)%sc
			g := nextGen(uint64(m.gen[slot]) + 1)
			m.gen[slot] = uint32(g)
			m.id[slot] = id0 + done + x
			if prios == nil {
				m.units[slot] = m.maxU
			} else {
				u, cl := m.q.units(prios[done+x])
				if cl {
					m.clamped++
				}
				m.units[slot] = u
			}
		}
		if prios != nil {
			for x := range k {
				slot := m.lay.stripeOffset(s) + (m.cursor[s]+x)%sc
				m.maxU = max(m.maxU, m.units[slot])
			}
		}
		m.cursor[s] += k
		done += k
	}
}

func (m *model) total() (t uint64) {
	for _, u := range m.units {
		t += u
	}
	return t
}

func (m *model) size() (n int) {
	for _, g := range m.gen {
		if g != 0 {
			n++
		}
	}
	return n
}

func TestBufferMatchesNaiveModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		capacity := rapid.IntRange(1, 300).Draw(rt, "capacity")
		maxLog := 0
		for 1<<(maxLog+1) <= min(capacity, 64) {
			maxLog++
		}
		stripes := 1 << rapid.IntRange(0, maxLog).Draw(rt, "stripesLog")
		cfg := Config{Capacity: capacity, Stripes: stripes, ObsDim: 2, MaxPriority: 50,
			NoMinTree: rapid.Bool().Draw(rt, "noMinTree")}
		b := mustNew(rt, cfg)
		m := newModel(b)
		seed := rapid.Uint64().Draw(rt, "seed")
		rng := rand.New(rand.NewPCG(seed, 0))
		nextID := 0
		var lastRefs []Ref

		check := func() {
			if err := b.CheckInvariants(); err != nil {
				rt.Fatalf("invariants: %v", err)
			}
			if b.Size() != m.size() {
				rt.Fatalf("size %d, model %d", b.Size(), m.size())
			}
			if got, want := b.TotalPriority(), m.q.priority(m.total()); got != want {
				rt.Fatalf("total %v, model %v", got, want)
			}
			if got, want := b.MaxPriority(), m.q.priority(m.maxU); got != want {
				rt.Fatalf("max %v, model %v", got, want)
			}
			minU := emptyMin
			for slot := range capacity {
				ref, p, ok := b.SlotPriority(slot)
				if ok != (m.gen[slot] != 0) || (ok && (ref.Gen != m.gen[slot] || p != m.q.priority(m.units[slot]))) {
					rt.Fatalf("slot %d: (%v %v %v), model gen %d units %d", slot, ref, p, ok, m.gen[slot], m.units[slot])
				}
				if m.units[slot] != 0 {
					minU = min(minU, m.units[slot])
				}
			}
			if mp, ok := b.MinPriority(); !cfg.NoMinTree && (ok != (minU != emptyMin) || (ok && mp != m.q.priority(minU))) {
				rt.Fatalf("min %v %v, model %v", mp, ok, minU)
			}
			if int(b.Stats().PrioritiesClamped) != m.clamped {
				rt.Fatalf("clamped %d, model %d", b.Stats().PrioritiesClamped, m.clamped)
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"insert": func(rt *rapid.T) {
				n := rapid.IntRange(1, capacity+5).Draw(rt, "n")
				var prios []float64
				if rapid.IntRange(0, 3).Draw(rt, "withPrio") > 0 {
					prios = rapid.SliceOfN(rapid.SampledFrom([]float64{0, 1e-12, 0.3, 1, 2.5, 49.9, 50, 80}), n, n).Draw(rt, "prios")
				}
				tr := items(cfg, nextID, n, nil)
				tr.Priority = prios
				if err := b.Insert(tr); err != nil {
					rt.Fatal(err)
				}
				m.insert(nextID, prios, n)
				nextID += n
				check()
			},
			"sample": func(rt *rapid.T) {
				size, total := m.size(), m.total()
				if size == 0 || total == 0 {
					return
				}
				n := rapid.IntRange(1, size).Draw(rt, "n")
				bt := mustBatch(t, b, n)
				if err := sampleInto(b, rng, bt, rapid.Bool().Draw(rt, "refsOnly")); err != nil {
					rt.Fatal(err)
				}
				for j, r := range bt.Refs {
					if m.gen[r.Slot] != r.Gen || m.units[r.Slot] == 0 || int(bt.Reward[j]) != m.id[r.Slot] {
						rt.Fatalf("row %d: ref %v reward %v; model gen %d units %d id %d", j, r, bt.Reward[j], m.gen[r.Slot], m.units[r.Slot], m.id[r.Slot])
					}
					if want := float64(m.units[r.Slot]) / float64(total); bt.Prob[j] != want {
						rt.Fatalf("row %d: Prob %v, model %v", j, bt.Prob[j], want)
					}
				}
				if bt.Size != size {
					rt.Fatalf("batch Size %d, model %d", bt.Size, size)
				}
				lastRefs = append(lastRefs[:0], bt.Refs...)
			},
			"update": func(rt *rapid.T) {
				if len(lastRefs) == 0 {
					return
				}
				refs := append([]Ref(nil), lastRefs...)
				prios := rapid.SliceOfN(rapid.SampledFrom([]float64{0, 0.5, 3, 49, 70}), len(refs), len(refs)).Draw(rt, "prios")
				want := UpdateResult{}
				for i, r := range refs {
					if m.gen[r.Slot] != r.Gen {
						want.Stale++
						continue
					}
					want.Applied++
					u, cl := m.q.units(prios[i])
					if cl {
						m.clamped++
					}
					m.units[r.Slot] = u
					m.maxU = max(m.maxU, u)
				}
				got, err := b.UpdatePriorities(refs, prios)
				if err != nil || got != want {
					rt.Fatalf("update: %+v %v, model %+v", got, err, want)
				}
				check()
			},
		})
	})
}
