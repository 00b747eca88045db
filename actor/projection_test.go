package actor

import (
	"context"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
)

func TestProjectionCode(t *testing.T) {
	p := mustProjection(t, 4, ProjectionDim, ProjectionSeed)
	q := mustProjection(t, 4, ProjectionDim, ProjectionSeed)
	a := []float32{0.1, -0.2, 0.03, 1.5}
	if p.Code(a) != q.Code(a) {
		t.Fatal("two projections with the same seed code a state differently")
	}
	b := []float32{0.1, -0.2, 0.03, 1.5000001} // within the 6-decimal rounding of every coordinate
	if p.Code(a) != p.Code(b) {
		t.Error("states closer than the rounding got different codes")
	}
	seen := map[uint64]bool{}
	for i := range 1000 {
		c := p.Code([]float32{float32(i) * 0.01, 0, 0, 0})
		if seen[c] {
			t.Fatalf("state %d collides with an earlier one", i)
		}
		seen[c] = true
	}
	if mustProjection(t, 4, ProjectionDim, ProjectionSeed+1).Code(a) == p.Code(a) {
		t.Error("another seed gave the same code")
	}
}

// TestActorProjectedStateCodes: on CartPole, which has no exact state code,
// the StateHash columns hold the projection of the stored observations, and
// 1-step transitions chain: NextStateHash of step t is StateHash of t+1.
func TestActorProjectedStateCodes(t *testing.T) {
	net, st := glorot(t, model.Config{In: 4, Hidden: []int{8}, Out: 2}, 3)
	a, err := New(Config{NStep: 1, LocalBatch: 64, Columns: Columns{Episode: true, StateHash: true}, Seed: 5},
		mustEnv(t, "CartPole-v1"), net, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tr buffer.Transitions
	if err := a.Fill(context.Background(), &tr); err != nil {
		t.Fatal(err)
	}
	p := mustProjection(t, 4, ProjectionDim, ProjectionSeed)
	for i := range tr.Len() {
		if got, want := tr.StateHash[i], p.Code(tr.Obs[4*i:4*i+4]); got != want {
			t.Fatalf("row %d: StateHash %#x, want the projection of its observation %#x", i, got, want)
		}
		if got, want := tr.NextStateHash[i], p.Code(tr.NextObs[4*i:4*i+4]); got != want {
			t.Fatalf("row %d: NextStateHash %#x, want the projection of its next observation %#x", i, got, want)
		}
		if i+1 < tr.Len() && tr.EpisodeID[i+1] == tr.EpisodeID[i] && tr.NextStateHash[i] != tr.StateHash[i+1] {
			t.Fatalf("rows %d and %d of one episode do not chain", i, i+1)
		}
	}
}

// mustProjection returns NewProjection(...) and fails the test on error.
func mustProjection(t testing.TB, obsDim, d int, seed uint64) *Projection {
	t.Helper()
	p, err := NewProjection(obsDim, d, seed)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
