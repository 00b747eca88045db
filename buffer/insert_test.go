package buffer

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestInsertRejectsBadInputWhole(t *testing.T) {
	cfg := Config{Capacity: 64, ObsDim: 4, NumActions: 3}
	cases := []struct {
		name string
		mod  func(*Transitions)
		err  error
		want string
	}{
		{"short obs", func(t *Transitions) { t.Obs = t.Obs[:len(t.Obs)-1] }, ErrShape, "column Obs has 31 values, want 32"},
		{"long next obs", func(t *Transitions) { t.NextObs = append(t.NextObs, 1) }, ErrShape, "NextObs"},
		{"missing discount", func(t *Transitions) { t.Discount = nil }, ErrShape, "Discount"},
		{"missing action", func(t *Transitions) { t.Action = nil }, ErrShape, "Action"},
		{"continuous action on discrete buffer", func(t *Transitions) { t.ActionVec = []float32{1} }, ErrShape, "not enabled"},
		{"column not enabled", func(t *Transitions) { t.EpisodeID = make([]uint64, 8) }, ErrShape, "EpisodeID is not enabled"},
		{"action out of range", func(t *Transitions) { t.Action[5] = 3 }, ErrShape, "Action[5] = 3"},
		{"negative action", func(t *Transitions) { t.Action[0] = -1 }, ErrShape, "Action[0] = -1"},
		{"NaN priority", func(t *Transitions) { t.Priority[3] = math.NaN() }, ErrPriority, "Priority[3] = NaN"},
		{"negative priority", func(t *Transitions) { t.Priority[7] = -0.5 }, ErrPriority, "Priority[7] = -0.5"},
		{"infinite priority", func(t *Transitions) { t.Priority[0] = math.Inf(1) }, ErrPriority, "Priority[0] = +Inf"},
		{"priority length", func(t *Transitions) { t.Priority = t.Priority[:2] }, ErrShape, "Priority"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := mustNew(t, cfg)
			tr := items(cfg, 0, 8, func(i int) float64 { return 1 })
			tc.mod(tr)
			err := b.Insert(tr)
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Insert: got %v, want %v mentioning %q", err, tc.err, tc.want)
			}
			if b.Size() != 0 || b.Stats().Inserts != 0 || b.TotalPriority() != 0 {
				t.Fatalf("a rejected batch left items behind: %+v", b.Stats())
			}
			if err := b.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestInsertEvictsOldestPerStripe(t *testing.T) {
	cfg := Config{Capacity: 8, Stripes: 2, ObsDim: 1}
	b := mustNew(t, cfg)
	// Single-item inserts alternate stripes, so ids 0..11 land as:
	// stripe 0 (slots 0-3): 0,2,4,6 then 8,10 overwrite 0,2.
	for id := range 12 {
		if err := b.Insert(items(cfg, id, 1, nil)); err != nil {
			t.Fatal(err)
		}
	}
	want := []float32{8, 10, 4, 6, 9, 11, 5, 7}
	bt := mustBatch(t, b, 1)
	for slot, id := range want {
		if !b.GatherSlot(bt, 0, slot) {
			t.Fatalf("slot %d unreadable", slot)
		}
		if bt.Reward[0] != id || bt.Obs[0] != id || bt.NextObs[0] != id+0.5 {
			t.Fatalf("slot %d holds %v/%v/%v, want id %v", slot, bt.Reward[0], bt.Obs[0], bt.NextObs[0], id)
		}
		wantGen := uint32(2)
		if id >= 8 {
			wantGen = 4
		}
		if bt.Refs[0].Gen != wantGen {
			t.Fatalf("slot %d generation %d, want %d", slot, bt.Refs[0].Gen, wantGen)
		}
	}
	if s := b.Stats(); s.Size != 8 || s.Inserts != 12 {
		t.Fatalf("stats %+v", s)
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestInsertAllColumnsRoundTrip(t *testing.T) {
	cfg := Config{Capacity: 40, Stripes: 4, ObsDim: 3, Action: Continuous, ActionDim: 2,
		Episode: true, GlobalStep: true, ActorID: true, StateHash: true,
		Floats: []FloatColumn{{"mu", 2}, {"logp", 1}}}
	b := mustNew(t, cfg)
	const n = 10
	tr := &Transitions{
		Obs: make([]float32, n*3), NextObs: make([]float32, n*3), ActionVec: make([]float32, n*2),
		Reward: make([]float32, n), Discount: make([]float32, n), Flags: make([]uint32, n),
		EpisodeID: make([]uint64, n), EpisodeStep: make([]int32, n), GlobalStep: make([]int64, n),
		ActorID: make([]int32, n), StateHash: make([]uint64, n), NextStateHash: make([]uint64, n),
		Floats: [][]float32{make([]float32, n*2), make([]float32, n)},
	}
	for i := range n {
		f := float32(i)
		tr.Obs[3*i], tr.Obs[3*i+2], tr.NextObs[3*i+1] = f, -f, f+1
		tr.ActionVec[2*i], tr.ActionVec[2*i+1] = f/2, -f/2
		tr.Reward[i], tr.Discount[i], tr.Flags[i] = f, 0.9, uint32(i%3)
		tr.EpisodeID[i], tr.EpisodeStep[i], tr.GlobalStep[i] = uint64(100+i), int32(i), int64(1e10)+int64(i)
		tr.ActorID[i], tr.StateHash[i], tr.NextStateHash[i] = int32(7*i), uint64(i)<<40, ^uint64(i)
		tr.Floats[0][2*i], tr.Floats[0][2*i+1], tr.Floats[1][i] = f*3, f*4, -f
	}
	if err := b.Insert(tr); err != nil {
		t.Fatal(err)
	}
	bt := mustBatch(t, b, 1)
	found := 0
	for slot := range cfg.Capacity {
		if !b.GatherSlot(bt, 0, slot) {
			continue
		}
		found++
		i := int(bt.Reward[0])
		f := float32(i)
		got := []float64{float64(bt.Obs[0]), float64(bt.Obs[2]), float64(bt.NextObs[1]), float64(bt.ActionVec[0]), float64(bt.ActionVec[1]),
			float64(bt.Discount[0]), float64(bt.Flags[0]), float64(bt.EpisodeID[0]), float64(bt.EpisodeStep[0]), float64(bt.GlobalStep[0]),
			float64(bt.ActorID[0]), float64(bt.StateHash[0]), float64(bt.NextStateHash[0]), float64(bt.Floats[0][0]), float64(bt.Floats[0][1]), float64(bt.Floats[1][0])}
		want := []float64{float64(f), float64(-f), float64(f + 1), float64(f / 2), float64(-f / 2),
			float64(float32(0.9)), float64(i % 3), float64(100 + i), float64(i), float64(int64(1e10) + int64(i)),
			float64(7 * i), float64(uint64(i) << 40), float64(^uint64(i)), float64(f * 3), float64(f * 4), float64(-f)}
		for k := range want {
			if got[k] != want[k] {
				t.Fatalf("item %d field %d: got %v, want %v", i, k, got[k], want[k])
			}
		}
	}
	if found != n {
		t.Fatalf("found %d items, want %d", found, n)
	}
	// Optional columns left nil are stored as zeros.
	tr2 := items(Config{Capacity: 40, ObsDim: 3}, 0, 1, nil)
	tr2.ActionVec, tr2.Action = []float32{1, 2}, nil
	if err := b.Insert(tr2); err != nil {
		t.Fatal(err)
	}
}

func TestGatherSlotAndRef(t *testing.T) {
	cfg := Config{Capacity: 4, Stripes: 1, ObsDim: 1}
	b := mustNew(t, cfg)
	bt := mustBatch(t, b, 1)
	if b.GatherSlot(bt, 0, 0) || b.GatherSlot(bt, 0, -1) || b.GatherSlot(bt, 0, 4) {
		t.Fatal("an empty or out-of-range slot was readable")
	}
	if err := b.Insert(items(cfg, 0, 4, nil)); err != nil {
		t.Fatal(err)
	}
	ref, _, ok := b.SlotPriority(2)
	if !ok || !b.GatherRef(bt, 0, ref) || bt.Reward[0] != 2 {
		t.Fatalf("GatherRef of a live ref failed: %v %v", ok, bt.Reward[0])
	}
	if err := b.Insert(items(cfg, 10, 4, nil)); err != nil { // overwrite everything
		t.Fatal(err)
	}
	if b.GatherRef(bt, 0, ref) {
		t.Fatal("GatherRef read an overwritten slot")
	}
	if got := b.Stats().StaleReads; got != 1 {
		t.Fatalf("StaleReads = %d, want 1", got)
	}
}

func TestSampleErrors(t *testing.T) {
	cfg := Config{Capacity: 16, ObsDim: 2}
	b := mustNew(t, cfg)
	rng := rand.New(rand.NewPCG(1, 1))
	if err := b.Sample(rng, mustBatch(t, b, 4)); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty buffer: got %v, want ErrEmpty", err)
	}
	if err := b.SampleUniform(rng, mustBatch(t, b, 4)); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty buffer, uniform: got %v, want ErrEmpty", err)
	}
	if err := b.Insert(items(cfg, 0, 3, func(int) float64 { return 0 })); err != nil {
		t.Fatal(err)
	}
	if err := b.Sample(rng, mustBatch(t, b, 2)); !errors.Is(err, ErrZeroMass) {
		t.Fatalf("all-zero priorities: got %v, want ErrZeroMass", err)
	}
	if err := b.SampleUniform(rng, mustBatch(t, b, 2)); err != nil {
		t.Fatalf("uniform sampling ignores priorities: %v", err)
	}
	for _, n := range []int{0, 4} {
		if err := b.Sample(rng, mustBatch(t, b, n)); !errors.Is(err, ErrBatchSize) {
			t.Fatalf("batch %d of 3 items: got %v, want ErrBatchSize", n, err)
		}
	}
}

func TestUpdateRejectsBadInputWhole(t *testing.T) {
	cfg := Config{Capacity: 16, ObsDim: 1}
	b := mustNew(t, cfg)
	if err := b.Insert(items(cfg, 0, 16, func(int) float64 { return 1 })); err != nil {
		t.Fatal(err)
	}
	bt := mustBatch(t, b, 4)
	if err := b.Sample(rand.New(rand.NewPCG(3, 3)), bt); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		refs  []Ref
		prios []float64
		err   error
	}{
		{"length mismatch", bt.Refs, []float64{1, 2}, ErrShape},
		{"NaN", bt.Refs, []float64{1, math.NaN(), 1, 1}, ErrPriority},
		{"negative", bt.Refs, []float64{1, 1, 1, -2}, ErrPriority},
		{"Inf", bt.Refs, []float64{math.Inf(1), 1, 1, 1}, ErrPriority},
		{"slot out of range", []Ref{{Slot: 16, Gen: 2}}, []float64{1}, ErrSlot},
	}
	for _, tc := range cases {
		if _, err := b.UpdatePriorities(tc.refs, tc.prios); !errors.Is(err, tc.err) {
			t.Fatalf("%s: got %v, want %v", tc.name, err, tc.err)
		}
	}
	if b.TotalPriority() != 16 || b.Stats().Updates != 0 {
		t.Fatalf("a rejected update changed the buffer: total %v, %+v", b.TotalPriority(), b.Stats())
	}
}

func TestStaleWriteBackDropped(t *testing.T) {
	cfg := Config{Capacity: 32, Stripes: 4, ObsDim: 1}
	b := mustNew(t, cfg)
	if err := b.Insert(items(cfg, 0, 32, func(int) float64 { return 1 })); err != nil {
		t.Fatal(err)
	}
	bt := mustBatch(t, b, 8)
	if err := b.Sample(rand.New(rand.NewPCG(5, 5)), bt); err != nil {
		t.Fatal(err)
	}
	old := append([]Ref(nil), bt.Refs...)
	// Overwrite the whole buffer with priority-2 items.
	if err := b.Insert(items(cfg, 100, 32, func(int) float64 { return 2 })); err != nil {
		t.Fatal(err)
	}
	res, err := b.UpdatePriorities(old, []float64{9, 9, 9, 9, 9, 9, 9, 9})
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != 0 || res.Stale != 8 {
		t.Fatalf("write-back to overwritten slots: %+v, want all 8 stale", res)
	}
	if b.TotalPriority() != 64 || b.MaxPriority() != 2 {
		t.Fatalf("a stale write-back reached the new occupants: total %v max %v", b.TotalPriority(), b.MaxPriority())
	}
	if s := b.Stats(); s.StaleUpdates != 8 || s.Updates != 0 {
		t.Fatalf("stats %+v", s)
	}
	// A write-back that races with half of the overwrites: only live refs apply.
	if err := b.Sample(rand.New(rand.NewPCG(6, 6)), bt); err != nil {
		t.Fatal(err)
	}
	live := bt.Refs[0]
	if err := b.Insert(items(cfg, 200, 1, nil)); err != nil {
		t.Fatal(err)
	}
	res, err = b.UpdatePriorities([]Ref{live, {Slot: live.Slot, Gen: live.Gen + 2}}, []float64{3, 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, p, _ := b.SlotPriority(int(live.Slot)); res.Applied+res.Stale != 2 || (res.Applied == 1) != (p == 3) {
		t.Fatalf("mixed write-back %+v, slot now has priority %v", res, p)
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestPriorityQuantisation(t *testing.T) {
	cfg := Config{Capacity: 8, Stripes: 1, ObsDim: 1, MaxPriority: 100}
	b := mustNew(t, cfg)
	res := b.Resolution()
	prios := []float64{0, res / 10, 1, 2.5, 100, 1e6, 1e-3, 37.25}
	if err := b.Insert(items(cfg, 0, len(prios), func(i int) float64 { return prios[i] })); err != nil {
		t.Fatal(err)
	}
	want := []float64{0, res, 1, 2.5, 100, 100, 1e-3, 37.25}
	for slot, w := range want {
		_, p, ok := b.SlotPriority(slot)
		if !ok || !near(p, w, res) {
			t.Fatalf("slot %d: priority %v, want %v ± %v", slot, p, w, res)
		}
	}
	if got := b.Stats().PrioritiesClamped; got != 1 {
		t.Fatalf("PrioritiesClamped = %d, want 1", got)
	}
	if b.MaxPriority() != 100 {
		t.Fatalf("MaxPriority = %v, want the clamp 100", b.MaxPriority())
	}
	if m, ok := b.MinPriority(); !ok || m != res {
		t.Fatalf("MinPriority = %v %v, want the resolution %v (0 is excluded)", m, ok, res)
	}
}

func TestForeignBatchRejected(t *testing.T) {
	cfg := Config{Capacity: 16, ObsDim: 2}
	b := mustNew(t, cfg)
	if err := b.Insert(items(cfg, 0, 16, func(int) float64 { return 1 })); err != nil {
		t.Fatal(err)
	}
	other := mustNew(t, Config{Capacity: 16, ObsDim: 3})
	foreign := mustBatch(t, other, 4)
	rng := rand.New(rand.NewPCG(1, 1))
	for name, f := range map[string]func() error{
		"Sample":        func() error { return b.Sample(rng, foreign) },
		"SampleUniform": func() error { return b.SampleUniform(rng, foreign) },
	} {
		if err := f(); !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), "column Obs has 12 values, want 8") {
			t.Errorf("%s with another buffer's batch: %v, want ErrShape naming the column", name, err)
		}
	}
	// SampleRefs needs only Refs and Prob, so any batch of the right length works.
	if err := b.SampleRefs(rng, foreign); err != nil {
		t.Errorf("SampleRefs: %v", err)
	}
	broken := mustBatch(t, b, 4)
	broken.Prob = broken.Prob[:3]
	if err := b.SampleRefs(rng, broken); !errors.Is(err, ErrShape) {
		t.Errorf("SampleRefs with a short Prob: %v, want ErrShape", err)
	}
	for name, f := range map[string]func(){
		"GatherRef row out of range": func() { b.GatherRef(mustBatch(t, b, 2), 2, Ref{}) },
		"GatherSlot foreign batch":   func() { b.GatherSlot(foreign, 0, 0) },
		"GatherSlot negative row":    func() { b.GatherSlot(mustBatch(t, b, 2), -1, 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestTransitionsReset: Reset empties every column and keeps its storage.
func TestTransitionsReset(t *testing.T) {
	n := func(k int) []float32 { return make([]float32, k) }
	tr := &Transitions{Obs: n(15), NextObs: n(15), Action: make([]int32, 5), ActionVec: n(5), Reward: n(5), Discount: n(5),
		Flags: make([]uint32, 5), EpisodeID: make([]uint64, 5), EpisodeStep: make([]int32, 5), GlobalStep: make([]int64, 5),
		ActorID: make([]int32, 5), StateHash: make([]uint64, 5), NextStateHash: make([]uint64, 5), Priority: make([]float64, 5),
		Floats: [][]float32{n(10)}}
	before := cap(tr.Obs)
	tr.Reset()
	if tr.Len() != 0 || len(tr.Obs)+len(tr.NextObs)+len(tr.Action)+len(tr.Discount)+len(tr.Flags)+len(tr.Priority) != 0 ||
		len(tr.EpisodeID)+len(tr.EpisodeStep)+len(tr.GlobalStep)+len(tr.ActorID)+len(tr.StateHash)+len(tr.NextStateHash)+len(tr.Floats[0]) != 0 {
		t.Fatalf("Reset left items: %+v", tr)
	}
	if cap(tr.Obs) != before {
		t.Fatalf("Reset dropped the obs storage: cap %d, was %d", cap(tr.Obs), before)
	}
}

// An empty, non-nil Priority column is absent, as nil is (a batch decoded
// from the wire has one): the items get the maximum priority.
func TestInsertEmptyPriorityColumn(t *testing.T) {
	cfg := Config{Capacity: 8, ObsDim: 1}
	b := mustNew(t, cfg)
	tr := items(cfg, 0, 3, nil)
	tr.Priority = []float64{}
	if err := b.Insert(tr); err != nil {
		t.Fatal(err)
	}
	for slot := range 3 {
		if _, p, ok := b.SlotPriority(slot); !ok || p != b.MaxPriority() {
			t.Errorf("slot %d: priority %v (stored %t), want the maximum %v", slot, p, ok, b.MaxPriority())
		}
	}
}
