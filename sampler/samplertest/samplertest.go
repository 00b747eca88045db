// Package samplertest is the conformance suite every sampler.Selector runs
// (in the manner of raft's rafttest and Acme's shared adder test cases),
// plus the helpers the stages' own tests share: a small buffer, seeded
// inserts whose data identify each item, and a chi-square goodness-of-fit
// check.
//
// # Usage
//
//	func TestMineConformance(t *testing.T) {
//		samplertest.Run(t, func(t *testing.T, buf *buffer.Buffer) sampler.Selector {
//			s, err := sampler.NewMine(buf, cfg)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		}, samplertest.Options{PriorityBased: true})
//	}
package samplertest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// Factory builds the stage under test over buf. The suite calls it once per
// fresh buffer; it must be deterministic (same buffer contents and seed,
// same samples).
type Factory func(t *testing.T, buf *buffer.Buffer) sampler.Selector

// Options adapts the suite to a stage.
type Options struct {
	// PriorityBased says the stage samples by stored priority, so an item
	// whose stored priority is 0 must never be drawn and a buffer whose
	// priorities are all 0 cannot be sampled (buffer.ErrZeroMass). Leave it
	// false for stages that ignore priorities (uniform).
	PriorityBased bool
	// Seed seeds the suite's random streams; 0 selects a fixed default. It
	// is printed with every failure.
	Seed uint64
	// StateHash gives the suite's buffers the state-hash columns
	// (buffer.Config.StateHash), for stages that index states (TER). Insert
	// then files item id under state id mod 8 with next state (id+1) mod 8,
	// the step into state 0 a termination, so the items form a ring with
	// one terminal state.
	StateHash bool
}

// DefaultSeed is the suite's seed when Options.Seed is 0.
const DefaultSeed = 0x5eed_a9e8

// NumActions is the number of discrete actions of the suite's buffers.
const NumActions = 4

// Config is the buffer configuration the suite uses: discrete actions, a
// 2-wide observation, a min tree, default stripes.
func Config(capacity int) buffer.Config {
	return buffer.Config{Capacity: capacity, ObsDim: 2, Action: buffer.Discrete, NumActions: NumActions}
}

// NewBuffer returns an empty buffer with Config(capacity).
func NewBuffer(t testing.TB, capacity int) *buffer.Buffer {
	t.Helper()
	b, err := buffer.New(Config(capacity))
	if err != nil {
		t.Fatalf("samplertest: buffer.New: %v", err)
	}
	return b
}

// NewBatch returns buf.NewBatch(n) and fails the test on error.
func NewBatch(t testing.TB, buf *buffer.Buffer, n int) *buffer.Batch {
	t.Helper()
	b, err := buf.NewBatch(n)
	if err != nil {
		t.Fatalf("samplertest: NewBatch(%d): %v", n, err)
	}
	return b
}

// Items builds n transitions with ids first, first+1, ...: item id has
// Reward = id, Obs = (id, -id), NextObs = (id+0.5, -id), Action = id mod
// NumActions, Discount = 0.99. prio, if not nil, is copied into Priority.
func Items(first, n int, prio []float64) *buffer.Transitions {
	t := &buffer.Transitions{
		Obs:      make([]float32, 2*n),
		NextObs:  make([]float32, 2*n),
		Action:   make([]int32, n),
		Reward:   make([]float32, n),
		Discount: make([]float32, n),
	}
	for i := range n {
		id := float32(first + i)
		t.Obs[2*i], t.Obs[2*i+1] = id, -id
		t.NextObs[2*i], t.NextObs[2*i+1] = id+0.5, -id
		t.Action[i] = int32((first + i) % NumActions)
		t.Reward[i] = id
		t.Discount[i] = 0.99
	}
	if prio != nil {
		t.Priority = append([]float64(nil), prio...)
	}
	return t
}

// Insert inserts Items(first, n, prio) into buf and fails the test on error.
// If buf stores state hashes it fills them (see Options.StateHash).
func Insert(t testing.TB, buf *buffer.Buffer, first, n int, prio []float64) {
	t.Helper()
	items := Items(first, n, prio)
	if buf.Config().StateHash {
		items.StateHash, items.NextStateHash, items.Flags = make([]uint64, n), make([]uint64, n), make([]uint32, n)
		for i := range n {
			id := uint64(first + i)
			items.StateHash[i], items.NextStateHash[i] = id%8, (id+1)%8
			if (id+1)%8 == 0 {
				items.Flags[i] = buffer.FlagTerminal
			}
		}
	}
	if err := buf.Insert(items); err != nil {
		t.Fatalf("samplertest: Insert(%d items from id %d): %v", n, first, err)
	}
}

// ID is the id of the item in row of b (see Items).
func ID(b *buffer.Batch, row int) int { return int(b.Reward[row]) }

// CheckRow reports whether row of b holds a whole item as Items wrote it
// (every column agrees with the row's id), naming the first mismatch.
func CheckRow(b *buffer.Batch, row int) error {
	id := b.Reward[row]
	switch {
	case b.Obs[2*row] != id || b.Obs[2*row+1] != -id:
		return fmt.Errorf("row %d (id %v): Obs = %v", row, id, b.Obs[2*row:2*row+2])
	case b.NextObs[2*row] != id+0.5 || b.NextObs[2*row+1] != -id:
		return fmt.Errorf("row %d (id %v): NextObs = %v", row, id, b.NextObs[2*row:2*row+2])
	case b.Action[row] != int32(int(id)%NumActions):
		return fmt.Errorf("row %d (id %v): Action = %d", row, id, b.Action[row])
	case b.Discount[row] != 0.99:
		return fmt.Errorf("row %d (id %v): Discount = %v", row, id, b.Discount[row])
	}
	return nil
}

// ChiSquare fails t when counts do not fit probs: Pearson's statistic
// sum (o-e)^2/e, with e = total·probs[i], against the 0.999 quantile of the
// chi-square distribution with (cells - 1) degrees of freedom. Cells whose
// expected count is below 5 are pooled into one cell first. Stratified
// draws have less variance than i.i.d. ones, so the test is conservative
// for them. seed is printed on failure.
func ChiSquare(t testing.TB, seed uint64, counts []int, probs []float64) {
	t.Helper()
	if len(counts) != len(probs) {
		t.Fatalf("samplertest: ChiSquare: %d counts, %d probabilities", len(counts), len(probs))
	}
	total, psum := 0, 0.0
	for i, c := range counts {
		total += c
		psum += probs[i]
	}
	if math.Abs(psum-1) > 1e-9 {
		t.Fatalf("samplertest: ChiSquare: probabilities sum to %v", psum)
	}
	var stat, poolE float64
	poolO, cells := 0, 0
	for i, c := range counts {
		e := float64(total) * probs[i]
		if e < 5 {
			if e == 0 && c > 0 {
				t.Fatalf("seed %#x: cell %d has probability 0 but %d draws", seed, i, c)
			}
			poolE += e
			poolO += c
			continue
		}
		d := float64(c) - e
		stat += d * d / e
		cells++
	}
	if poolE > 0 {
		d := float64(poolO) - poolE
		stat += d * d / poolE
		cells++
	}
	if cells < 2 {
		t.Fatalf("samplertest: ChiSquare: %d cells after pooling; draw more", cells)
	}
	df := float64(cells - 1)
	q := distuv.ChiSquared{K: df}.Quantile(0.999)
	if stat > q {
		t.Errorf("seed %#x: chi-square %.2f > %.2f (0.999 quantile, %v dof, %d draws)", seed, stat, q, df, total)
	}
}

// Run runs the conformance suite against the stages newSel builds. Each
// subtest uses fresh buffers from NewBuffer (with the state-hash columns
// if opt.StateHash).
func Run(t *testing.T, newSel Factory, opt Options) {
	seed := opt.Seed
	if seed == 0 {
		seed = DefaultSeed
	}
	rngFor := func(i uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, i)) }
	newBuf := func(t *testing.T, capacity int) *buffer.Buffer {
		t.Helper()
		c := Config(capacity)
		c.StateHash = opt.StateHash
		b, err := buffer.New(c)
		if err != nil {
			t.Fatalf("samplertest: buffer.New: %v", err)
		}
		return b
	}
	build := func(t *testing.T, buf *buffer.Buffer) sampler.Selector {
		t.Helper()
		s := newSel(t, buf)
		if s == nil {
			t.Fatal("factory returned nil")
		}
		return s
	}
	fatalf := func(t *testing.T, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %#x: "+format, append([]any{seed}, args...)...)
	}

	t.Run("String", func(t *testing.T) {
		s := build(t, newBuf(t, 8))
		if s.String() == "" {
			t.Fatal("String() is empty")
		}
	})

	t.Run("SampleErrors", func(t *testing.T) {
		buf := newBuf(t, 16)
		s := build(t, buf)
		rng := rngFor(1)
		if err := s.Sample(rng, NewBatch(t, buf, 4)); !errors.Is(err, buffer.ErrEmpty) {
			fatalf(t, "Sample on an empty buffer: %v, want ErrEmpty", err)
		}
		Insert(t, buf, 0, 8, nil)
		if err := s.Sample(rng, NewBatch(t, buf, 0)); !errors.Is(err, buffer.ErrBatchSize) {
			fatalf(t, "Sample of 0 rows: %v, want ErrBatchSize", err)
		}
		if err := s.Sample(rng, NewBatch(t, buf, 9)); !errors.Is(err, buffer.ErrBatchSize) {
			fatalf(t, "Sample of 9 rows from 8 items: %v, want ErrBatchSize", err)
		}
		for _, n := range []int{1, 8} {
			if err := s.Sample(rng, NewBatch(t, buf, n)); err != nil {
				fatalf(t, "Sample of %d rows from 8 items: %v", n, err)
			}
		}
	})

	t.Run("UpdateRejectsBadInput", func(t *testing.T) {
		buf := newBuf(t, 16)
		s := build(t, buf)
		Insert(t, buf, 0, 16, nil)
		b := NewBatch(t, buf, 4)
		if err := s.Sample(rngFor(2), b); err != nil {
			fatalf(t, "Sample: %v", err)
		}
		refs := append([]buffer.Ref(nil), b.Refs...)
		before := snapshot(buf)
		updates := buf.Stats().Updates
		for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, -1e-300} {
			td := []float64{0.5, 0.25, 2, bad}
			res, err := s.Update(refs, td)
			if !errors.Is(err, buffer.ErrPriority) {
				fatalf(t, "Update with absTD %v: err = %v, want ErrPriority", bad, err)
			}
			if res != (buffer.UpdateResult{}) {
				fatalf(t, "rejected Update with absTD %v reported %+v", bad, res)
			}
		}
		if _, err := s.Update(refs, []float64{1, 1, 1}); !errors.Is(err, buffer.ErrShape) {
			fatalf(t, "Update with 4 refs and 3 TD errors: %v, want ErrShape", err)
		}
		if _, err := s.Update(refs[:1], []float64{1, 1}); !errors.Is(err, buffer.ErrShape) {
			fatalf(t, "Update with 1 ref and 2 TD errors: %v, want ErrShape", err)
		}
		if got := buf.Stats().Updates; got != updates {
			fatalf(t, "rejected updates wrote %d priorities", got-updates)
		}
		if after := snapshot(buf); !equal(before, after) {
			fatalf(t, "rejected updates changed stored priorities:\nbefore %v\nafter  %v", before, after)
		}
		res, err := s.Update(nil, nil)
		if err != nil || res != (buffer.UpdateResult{}) {
			fatalf(t, "empty Update: %+v, %v", res, err)
		}
	})

	t.Run("RowsValid", func(t *testing.T) {
		buf := newBuf(t, 64)
		s := build(t, buf)
		rng := rngFor(3)
		var prio []float64
		if opt.PriorityBased {
			prio = make([]float64, 100)
			for i := range prio {
				prio[i] = 0.01 + 3*rng.Float64()
			}
		}
		Insert(t, buf, 0, 100, prio) // wraps: 64 stored
		check := NewBatch(t, buf, 1)
		for _, n := range []int{1, 7, 32, 64} {
			b := NewBatch(t, buf, n)
			for range 5 {
				if err := s.Sample(rng, b); err != nil {
					fatalf(t, "Sample(%d): %v", n, err)
				}
				if b.Size < 1 || b.Size > buf.Size() {
					fatalf(t, "batch Size %d, buffer holds %d", b.Size, buf.Size())
				}
				for j := range n {
					ref := b.Refs[j]
					cur, _, ok := buf.SlotPriority(int(ref.Slot))
					if !ok || cur != ref {
						fatalf(t, "row %d: Ref %+v, the slot holds %+v (ok=%v)", j, ref, cur, ok)
					}
					if p := b.Prob[j]; !(p > 0 && p <= 1) {
						fatalf(t, "row %d: Prob = %v, want (0, 1]", j, p)
					}
					if err := CheckRow(b, j); err != nil {
						fatalf(t, "%v", err)
					}
					if !buf.GatherRef(check, 0, ref) || ID(check, 0) != ID(b, j) {
						fatalf(t, "row %d: id %d, but its Ref holds id %d", j, ID(b, j), ID(check, 0))
					}
				}
				td := make([]float64, n)
				for j := range td {
					td[j] = 2 * rng.Float64()
				}
				if _, err := s.Update(b.Refs, td); err != nil {
					fatalf(t, "Update: %v", err)
				}
			}
		}
	})

	t.Run("UpdateStoresPriority", func(t *testing.T) {
		buf := newBuf(t, 32)
		s := build(t, buf)
		rng := rngFor(4)
		Insert(t, buf, 0, 32, nil)
		b := NewBatch(t, buf, 8)
		if err := s.Sample(rng, b); err != nil {
			fatalf(t, "Sample: %v", err)
		}
		td := make([]float64, 8)
		last := map[buffer.Ref]float64{}
		for j := range td {
			td[j] = 3 * rng.Float64()
			last[b.Refs[j]] = td[j]
		}
		res, err := s.Update(b.Refs, td)
		if err != nil || res.Applied != 8 || res.Stale != 0 {
			fatalf(t, "Update of 8 live refs: %+v, %v; want 8 applied", res, err)
		}
		res2 := buf.Resolution()
		for ref, d := range last {
			_, got, _ := buf.SlotPriority(int(ref.Slot))
			want := min(s.Priority(d), buf.Config().MaxPriority)
			if math.Abs(got-want) > res2+1e-12*want {
				fatalf(t, "slot %d after Update(absTD=%v): priority %v, Priority says %v", ref.Slot, d, got, want)
			}
		}
	})

	t.Run("StaleUpdatesDropped", func(t *testing.T) {
		buf := newBuf(t, 32)
		s := build(t, buf)
		rng := rngFor(5)
		Insert(t, buf, 0, 32, nil)
		b := NewBatch(t, buf, 8)
		if err := s.Sample(rng, b); err != nil {
			fatalf(t, "Sample: %v", err)
		}
		refs := append([]buffer.Ref(nil), b.Refs...)
		Insert(t, buf, 32, 32, nil) // overwrites every slot
		before := snapshot(buf)
		staleBefore := buf.Stats().StaleUpdates
		res, err := s.Update(refs, []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8})
		if err != nil {
			fatalf(t, "Update of stale refs: %v", err)
		}
		if res.Stale != len(refs) || res.Applied != 0 {
			fatalf(t, "Update of %d overwritten refs: %+v, want all stale", len(refs), res)
		}
		if got := buf.Stats().StaleUpdates - staleBefore; got != uint64(len(refs)) {
			fatalf(t, "buffer counted %d stale updates, want %d", got, len(refs))
		}
		if after := snapshot(buf); !equal(before, after) {
			fatalf(t, "stale updates changed the new occupants' priorities")
		}
	})

	t.Run("Deterministic", func(t *testing.T) {
		run := func() (refs []buffer.Ref, probs []float64) {
			buf := newBuf(t, 64)
			s := build(t, buf)
			rng := rngFor(6)
			Insert(t, buf, 0, 40, nil)
			b := NewBatch(t, buf, 8)
			for round := range 30 {
				if err := s.Sample(rng, b); err != nil {
					fatalf(t, "round %d: Sample: %v", round, err)
				}
				refs = append(refs, b.Refs...)
				probs = append(probs, b.Prob...)
				td := make([]float64, 8)
				for j := range td {
					td[j] = float64((ID(b, j)*7+round)%11) / 4
				}
				if _, err := s.Update(b.Refs, td); err != nil {
					fatalf(t, "round %d: Update: %v", round, err)
				}
				Insert(t, buf, 40+3*round, 3, nil)
			}
			return refs, probs
		}
		r1, p1 := run()
		r2, p2 := run()
		for i := range r1 {
			if r1[i] != r2[i] || p1[i] != p2[i] {
				fatalf(t, "draw %d differs between identical runs: %+v p=%v vs %+v p=%v", i, r1[i], p1[i], r2[i], p2[i])
			}
		}
	})

	if opt.PriorityBased {
		t.Run("ZeroPriorityNeverSampled", func(t *testing.T) {
			buf := newBuf(t, 64)
			s := build(t, buf)
			rng := rngFor(7)
			prio := make([]float64, 64)
			for i := range prio {
				if i%2 == 1 {
					prio[i] = 0.05 + rng.Float64()
				}
			}
			Insert(t, buf, 0, 64, prio)
			b := NewBatch(t, buf, 16)
			for round := range 200 {
				if err := s.Sample(rng, b); err != nil {
					fatalf(t, "round %d: Sample: %v", round, err)
				}
				for j := range b.Len() {
					if ID(b, j)%2 == 0 {
						fatalf(t, "round %d row %d: drew item %d, whose priority is 0", round, j, ID(b, j))
					}
				}
				td := make([]float64, b.Len())
				for j := range td {
					td[j] = rng.Float64()
				}
				if _, err := s.Update(b.Refs, td); err != nil {
					fatalf(t, "round %d: Update: %v", round, err)
				}
			}
		})

		t.Run("AllZeroPriorities", func(t *testing.T) {
			buf := newBuf(t, 16)
			s := build(t, buf)
			Insert(t, buf, 0, 16, make([]float64, 16))
			if err := s.Sample(rngFor(8), NewBatch(t, buf, 4)); !errors.Is(err, buffer.ErrZeroMass) {
				fatalf(t, "Sample with every priority 0: %v, want ErrZeroMass", err)
			}
		})
	}

	t.Run("PriorityMonotone", func(t *testing.T) {
		buf := newBuf(t, 8)
		s := build(t, buf)
		prev := math.Inf(-1)
		for _, d := range []float64{0, 1e-9, 1e-3, 0.5, 1, 2, 10, 1e3} {
			p := s.Priority(d)
			if !(p >= 0) || math.IsInf(p, 0) {
				fatalf(t, "Priority(%v) = %v, want finite and >= 0", d, p)
			}
			if p < prev {
				fatalf(t, "Priority(%v) = %v is below the priority of a smaller error (%v)", d, p, prev)
			}
			prev = p
		}
	})

	t.Run("Weights", func(t *testing.T) {
		buf := newBuf(t, 64)
		s := build(t, buf)
		w, ok := s.(sampler.Weighter)
		if !ok {
			t.Skip("stage is not a Weighter")
		}
		rng := rngFor(9)
		Insert(t, buf, 0, 64, nil)
		b := NewBatch(t, buf, 16)
		for round := range 20 {
			if err := s.Sample(rng, b); err != nil {
				fatalf(t, "Sample: %v", err)
			}
			refs := append([]buffer.Ref(nil), b.Refs...)
			probs := append([]float64(nil), b.Prob...)
			for _, step := range []int64{0, 1, 100, 1 << 40} {
				if err := w.Weights(b, step); err != nil {
					fatalf(t, "round %d: Weights(step %d): %v", round, step, err)
				}
				if len(b.Weight) != b.Len() {
					fatalf(t, "Weights filled %d weights for %d rows", len(b.Weight), b.Len())
				}
				for j, x := range b.Weight {
					if !(x > 0 && x <= 1) {
						fatalf(t, "round %d step %d row %d: weight %v, want (0, 1]", round, step, j, x)
					}
				}
			}
			for j := range refs {
				if b.Refs[j] != refs[j] || b.Prob[j] != probs[j] {
					fatalf(t, "Weights changed row %d's Ref or Prob", j)
				}
			}
			td := make([]float64, b.Len())
			for j := range td {
				td[j] = 4 * rng.Float64() * rng.Float64()
			}
			if _, err := s.Update(b.Refs, td); err != nil {
				fatalf(t, "Update: %v", err)
			}
		}
	})

	t.Run("ConcurrentInserts", func(t *testing.T) {
		buf := newBuf(t, 256)
		s := build(t, buf)
		Insert(t, buf, 0, 256, nil)
		rng := rngFor(10)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // an actor: annotates its own priorities and inserts
			defer wg.Done()
			ar := rngFor(11)
			for i := range 200 {
				td := make([]float64, 8)
				for j := range td {
					td[j] = ar.Float64() - 0.1 // some unknown (negative)
				}
				items := Items(256+8*i, 8, nil)
				if err := sampler.Annotate(s, items, td); err != nil {
					t.Errorf("Annotate: %v", err)
					return
				}
				if err := buf.Insert(items); err != nil {
					t.Errorf("Insert: %v", err)
					return
				}
			}
		}()
		b := NewBatch(t, buf, 16)
		td := make([]float64, 16)
		for round := range 200 {
			if err := s.Sample(rng, b); err != nil {
				t.Errorf("seed %#x: round %d: Sample: %v", seed, round, err)
				break
			}
			for j := range b.Len() {
				if err := CheckRow(b, j); err != nil {
					t.Errorf("seed %#x: round %d: torn row: %v", seed, round, err)
				}
			}
			for j := range td {
				td[j] = rng.Float64()
			}
			if _, err := s.Update(b.Refs, td); err != nil {
				t.Errorf("seed %#x: round %d: Update: %v", seed, round, err)
				break
			}
		}
		wg.Wait()
		if err := buf.CheckInvariants(); err != nil {
			fatalf(t, "buffer invariants after the run: %v", err)
		}
	})
}

// slotState is one slot's Ref and priority, for before/after comparisons.
type slotState struct {
	ref buffer.Ref
	p   float64
	ok  bool
}

func snapshot(buf *buffer.Buffer) []slotState {
	s := make([]slotState, buf.Capacity())
	for i := range s {
		s[i].ref, s[i].p, s[i].ok = buf.SlotPriority(i)
	}
	return s
}

func equal(a, b []slotState) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
