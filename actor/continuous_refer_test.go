package actor

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// TestContinuousREFERColumns: with the REFER float columns the actor
// stores the unclipped sample as the action, ScaleAction(π(s)) in the
// mean column and σ·half in the std column, and sends the sample clipped
// to the box.
func TestContinuousREFERColumns(t *testing.T) {
	env := newBoxEnv()
	net, st := policy(t, 2, 2, []int{8}, 30, 5) // saturated: many samples fall outside the box
	const sigma = 0.5
	c, err := NewContinuous(ContinuousConfig{Sigma: sigma, NStep: 1, LocalBatch: 20, Seed: 3, Floats: sampler.REFERColumns(2), Behaviour: &Behaviour{Mean: 0, Std: 1, Boot: 2}}, env, net, st)
	if err != nil {
		t.Fatal(err)
	}
	var all buffer.Transitions
	for range 5 {
		var b buffer.Transitions
		if err := c.Fill(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		appendAll(&all, &b)
		if len(all.Floats) == 0 {
			all.Floats = make([][]float32, len(b.Floats))
		}
		for k := range b.Floats {
			all.Floats[k] = append(all.Floats[k], b.Floats[k]...)
		}
	}
	n := all.Len()
	if len(all.Floats) != 3 || len(all.Floats[0]) != 2*n || len(all.Floats[1]) != 2*n || len(all.Floats[2]) != n {
		t.Fatalf("float columns %d for %d rows", len(all.Floats), n)
	}
	ref := net.Clone()
	if _, err := c.Update(); err != nil {
		t.Fatal(err)
	}
	copy(ref.Params(), c.net.Params())
	mean := make([]float64, 2)
	outside := 0
	for i := range n {
		ScaleAction(env.box, mean, ref.Forward32(all.Obs[i*2:(i+1)*2]))
		sent := env.steps[i].action
		for j := range 2 {
			a := float64(all.ActionVec[i*2+j])
			if got, want := float64(all.Floats[0][i*2+j]), mean[j]; math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
				t.Fatalf("row %d dim %d: mean %v, want %v", i, j, got, want)
			}
			if got, want := float64(all.Floats[1][i*2+j]), sigma*(env.box.High[j]-env.box.Low[j])/2; math.Abs(got-want) > 1e-6 {
				t.Fatalf("row %d dim %d: std %v, want %v", i, j, got, want)
			}
			lo, hi := env.box.Low[j], env.box.High[j]
			if a < lo || a > hi {
				outside++
			}
			if clipped := max(lo, min(hi, a)); math.Abs(clipped-sent[j]) > 1e-6*(1+math.Abs(clipped)) {
				t.Fatalf("row %d dim %d: stored %v, sent %v (want it clipped)", i, j, a, sent[j])
			}
		}
	}
	if outside == 0 {
		t.Error("no stored action outside the box: the unclipped sample was not stored")
	}
	if _, err := NewContinuous(ContinuousConfig{Sigma: sigma, NStep: 3, Floats: sampler.REFERColumns(2), Behaviour: &Behaviour{Mean: 0, Std: 1, Boot: 2}}, newBoxEnv(), net, st); !errors.Is(err, ErrConfig) {
		t.Errorf("NStep 3 with REFER columns: %v", err)
	}
	for name, cfg := range map[string]ContinuousConfig{
		"Floats without Behaviour": {Sigma: sigma, NStep: 1, Floats: sampler.REFERColumns(2)},
		"Behaviour without Floats": {Sigma: sigma, NStep: 1, Behaviour: &Behaviour{Mean: 0, Std: 1}},
		"Behaviour of the wrong width": {Sigma: sigma, NStep: 1, Floats: sampler.REFERColumns(2),
			Behaviour: &Behaviour{Mean: 0, Std: 2}},
	} {
		if _, err := NewContinuous(cfg, newBoxEnv(), net, st); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}
