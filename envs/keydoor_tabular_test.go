package envs_test

import (
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/envs"
)

// TestKeyDoorTabular plays KeyDoor-Tabular and the factored KeyDoor side by
// side with the same random actions: the dynamics (rewards, flags, state
// hashes) are the same, every tabular observation is one-hot with its 1 at
// TabularIndex, and the index is an injective code of the state (equal
// indices iff equal hashes).
func TestKeyDoorTabular(t *testing.T) {
	for _, size := range []int{5, 6} {
		tab, err := envs.Make("KeyDoor-Tabular", envs.WithSize(size))
		if err != nil {
			t.Fatal(err)
		}
		fac, err := envs.NewKeyDoor(envs.WithSize(size))
		if err != nil {
			t.Fatal(err)
		}
		kd := tab.(*envs.KeyDoor)
		dim := 24 * (size - 2) * (size - 2)
		if tab.ObservationSpace().Dim() != dim || tab.MaxEpisodeSteps() != fac.MaxEpisodeSteps() {
			t.Fatalf("size %d: obs dim %d (want %d), limit %d", size, tab.ObservationSpace().Dim(), dim, tab.MaxEpisodeSteps())
		}
		byHash, byIndex := map[uint64]int{}, map[int]uint64{}
		check := func(obs []float64) {
			t.Helper()
			i := kd.TabularIndex()
			if len(obs) != dim || obs[i] != 1 {
				t.Fatalf("size %d: observation of %d values without its 1 at TabularIndex %d", size, len(obs), i)
			}
			var sum float64
			for _, v := range obs {
				sum += v
			}
			if sum != 1 {
				t.Fatalf("size %d: observation sums to %v, want one-hot", size, sum)
			}
			h := kd.StateHash()
			if j, ok := byHash[h]; ok && j != i {
				t.Fatalf("size %d: state %#x has indices %d and %d", size, h, j, i)
			}
			if g, ok := byIndex[i]; ok && g != h {
				t.Fatalf("size %d: index %d for states %#x and %#x", size, i, g, h)
			}
			byHash[h], byIndex[i] = i, h
		}
		rng := rand.New(rand.NewPCG(3, uint64(size)))
		for seed := range uint64(20) {
			check(tab.Reset(seed))
			fac.Reset(seed)
			if kd.TabularIndex() != 0 {
				t.Fatalf("start (1, 1) east, no key, door locked: index %d, want 0", kd.TabularIndex())
			}
			for {
				a := envs.Action{Index: rng.IntN(5)}
				rt, err := tab.Step(a)
				if err != nil {
					t.Fatal(err)
				}
				rf, err := fac.Step(a)
				if err != nil {
					t.Fatal(err)
				}
				if rt.Reward != rf.Reward || rt.Terminated != rf.Terminated || rt.Truncated != rf.Truncated || kd.StateHash() != fac.StateHash() {
					t.Fatalf("size %d seed %d: tabular %+v hash %#x, factored %+v hash %#x", size, seed, rt, kd.StateHash(), rf, fac.StateHash())
				}
				check(rt.Obs)
				if rt.Done() {
					break
				}
			}
		}
		if len(byIndex) < 50 {
			t.Errorf("size %d: only %d distinct states visited", size, len(byIndex))
		}
		t.Logf("size %d: %d of %d codes visited", size, len(byIndex), dim)
	}
}

// TestKeyDoorTabularGoal: the 15-step solution of the fixed 6x6 layout
// ends in the goal cell, facing south with the key and the door open.
func TestKeyDoorTabularGoal(t *testing.T) {
	env, err := envs.NewKeyDoor(envs.WithTabular())
	if err != nil {
		t.Fatal(err)
	}
	env.Reset(0)
	var res envs.StepResult
	for _, a := range []int{1, 2, 2, 3, 0, 2, 0, 2, 1, 4, 2, 2, 1, 2, 2} {
		res = mustStep(t, env, a)
	}
	// (x, y) = (4, 4), direction south (1), carrying, door open (2).
	want := ((((4-1)*4+4-1)*4+1)*2+1)*3 + 2
	if !res.Terminated || res.Reward != 360 || env.TabularIndex() != want || res.Obs[want] != 1 {
		t.Fatalf("after the solution: %+v at index %d, want the goal at %d", res, env.TabularIndex(), want)
	}
}
