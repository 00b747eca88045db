package model

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

func smallNet(t testing.TB, seed uint64) *Net {
	t.Helper()
	n, err := NewNet(Config{In: 4, Hidden: []int{16, 16}, Out: 2}, rand.New(rand.NewPCG(seed, 0)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// trainSteps runs k Adam steps on random batches.
func trainSteps(t testing.TB, n *Net, adam *Adam, rng *rand.Rand, k int) {
	t.Helper()
	const b = 8
	x := make([]float64, b*n.In())
	actions := make([]int32, b)
	target := make([]float64, b)
	dq := make([]float64, b*n.Out())
	for range k {
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		for i := range actions {
			actions[i] = int32(rng.IntN(n.Out()))
			target[i] = rng.NormFloat64()
		}
		Loss{}.Selected(dq, n.Forward(x), actions, target, nil)
		n.Backward(dq)
		if _, err := adam.Step(n.Params(), n.Grads()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotImmutable: a published snapshot keeps its values while the
// learner goes on training, and an actor that loaded it is unaffected.
func TestSnapshotImmutable(t *testing.T) {
	learner := smallNet(t, 1)
	adam, _ := NewAdam(learner.NumParams(), AdamConfig{LR: 1e-2})
	var store Store
	if store.Load() != nil {
		t.Fatal("empty Store returned a Params")
	}
	snap := learner.Snapshot(7)
	store.Publish(snap)
	frozen := slices.Clone(snap.Weights())

	actor := smallNet(t, 99)
	p := store.Load()
	if p != snap || p.Version() != 7 || p.Len() != learner.NumParams() {
		t.Fatalf("Load = %p v%d, want the published snapshot", p, p.Version())
	}
	if err := actor.SetParams(p); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(actor.Params(), frozen) {
		t.Fatal("actor parameters differ from the snapshot")
	}

	trainSteps(t, learner, adam, rand.New(rand.NewPCG(2, 2)), 20)
	learner.SoftUpdate(actor, 0.5)
	if slices.Equal(learner.Params(), frozen) {
		t.Fatal("training did not change the learner")
	}
	if !slices.Equal(snap.Weights(), frozen) {
		t.Fatal("the learner's steps changed a published snapshot")
	}
	if !slices.Equal(actor.Params(), frozen) {
		t.Fatal("the learner's steps changed an actor's copy")
	}
	// The actor's own forward passes do not touch the snapshot either.
	actor.Forward(make([]float64, 4*actor.In()))
	if !slices.Equal(snap.Weights(), frozen) {
		t.Fatal("an actor's Forward changed the snapshot")
	}

	store.Publish(learner.Snapshot(8))
	if store.Load().Version() != 8 || !slices.Equal(snap.Weights(), frozen) {
		t.Fatal("a newer Publish disturbed the older snapshot")
	}

	// NewParams copies.
	w := []float64{1, 2}
	np := NewParams(3, w)
	w[0] = 9
	if np.Weights()[0] != 1 {
		t.Error("NewParams did not copy")
	}
	if err := actor.SetParams(np); !errors.Is(err, ErrShape) {
		t.Errorf("SetParams of the wrong length: %v", err)
	}
}

// TestStoreConcurrent: one learner publishes while actors load and copy,
// under the race detector. Each snapshot is filled with its own version, so
// an actor that ever sees a mixed vector has read a mutated snapshot.
func TestStoreConcurrent(t *testing.T) {
	cfg := Config{In: 3, Hidden: []int{8}, Out: 2}
	learner, err := NewNet(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var store Store
	store.Publish(learner.Snapshot(0))
	const versions, actors = 300, 4
	var wg sync.WaitGroup
	errs := make(chan error, actors)
	for range actors {
		wg.Go(func() {
			actor, _ := NewNet(cfg, nil)
			seen := uint64(0)
			for seen < versions {
				p := store.Load()
				if p.Version() < seen {
					errs <- errors.New("versions went backwards")
					return
				}
				seen = p.Version()
				if err := actor.SetParams(p); err != nil {
					errs <- err
					return
				}
				for _, w := range actor.Params() {
					if w != float64(seen) {
						errs <- errors.New("an actor read a snapshot that was modified")
						return
					}
				}
				actor.Forward([]float64{1, 2, 3})
			}
		})
	}
	for v := uint64(1); v <= versions; v++ {
		for i := range learner.Params() {
			learner.Params()[i] = float64(v)
		}
		store.Publish(learner.Snapshot(v))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestTargetUpdates(t *testing.T) {
	online, target := smallNet(t, 1), smallNet(t, 2)
	if !online.SameShape(target) {
		t.Fatal("SameShape")
	}
	o0, t0 := slices.Clone(online.Params()), slices.Clone(target.Params())

	target.SoftUpdate(online, 0.25)
	for i, v := range target.Params() {
		if want := 0.25*o0[i] + 0.75*t0[i]; v != want {
			t.Fatalf("Polyak: target[%d] = %g, want %g", i, v, want)
		}
	}
	if !slices.Equal(online.Params(), o0) {
		t.Fatal("SoftUpdate changed its source")
	}
	target.SoftUpdate(online, 0)
	target.SoftUpdate(online, 1)
	if !slices.Equal(target.Params(), o0) {
		t.Fatal("tau = 1 is not a copy")
	}
	target2 := smallNet(t, 3)
	target2.CopyFrom(online)
	if !slices.Equal(target2.Params(), o0) {
		t.Fatal("CopyFrom")
	}
	online.Params()[0] += 1
	if target2.Params()[0] == online.Params()[0] {
		t.Fatal("CopyFrom shares memory")
	}
	c := online.Clone()
	if !slices.Equal(c.Params(), online.Params()) {
		t.Fatal("Clone")
	}
	c.Params()[1] += 1
	if c.Params()[1] == online.Params()[1] {
		t.Fatal("Clone shares memory")
	}

	other, _ := NewNet(Config{In: 4, Hidden: []int{16, 8}, Out: 2}, nil)
	for name, f := range map[string]func(){
		"CopyFrom shape":   func() { other.CopyFrom(online) },
		"SoftUpdate shape": func() { other.SoftUpdate(online, 0.1) },
		"tau > 1":          func() { target.SoftUpdate(online, 1.5) },
		"Polyak lengths":   func() { Polyak(make([]float64, 2), make([]float64, 3), 0.5) },
		"Publish nil":      func() { new(Store).Publish(nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		})
	}
}
