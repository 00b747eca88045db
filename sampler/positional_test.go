package sampler_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// TestPositional: the methods that draw at positions of their mass
// declare it (per, lap: the total priority; uniform, pal: the number of
// items), the others do not; SampleAt returns the mass it scaled to and
// each row's share of it, and refuses bad positions.
func TestPositional(t *testing.T) {
	cfg := buffer.Config{Capacity: 16, ObsDim: 1}
	for _, c := range []struct {
		name       string
		positional bool
		uniform    bool
	}{{"per", true, false}, {"lap", true, false}, {"uniform", true, true}, {"pal", true, true}, {"rank", false, false}, {"ners", false, false}} {
		buf, err := buffer.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m, err := sampler.NewMethod(c.name, buf, sampler.MethodConfig{BetaSteps: 10})
		if err != nil {
			t.Fatal(err)
		}
		if (m.Positional != nil) != c.positional {
			t.Errorf("%s: Positional declared %t, want %t", c.name, m.Positional != nil, c.positional)
		}
		if m.Positional == nil {
			continue
		}
		tr := &buffer.Transitions{}
		for i := range 8 {
			tr.Obs = append(tr.Obs, float32(i))
			tr.NextObs = append(tr.NextObs, float32(i))
			tr.Action = append(tr.Action, 0)
			tr.Reward = append(tr.Reward, float32(i))
			tr.Discount = append(tr.Discount, 1)
			tr.Priority = append(tr.Priority, float64(i+1))
		}
		if err := buf.Insert(tr); err != nil {
			t.Fatal(err)
		}
		want := buf.TotalPriority()
		if c.uniform {
			want = 8
		}
		if got := m.Positional.Mass(); got != want {
			t.Errorf("%s: Mass %v, want %v", c.name, got, want)
		}
		dst, _ := buf.NewBatch(3)
		rng := rand.New(rand.NewPCG(1, 2))
		mass, err := m.Positional.SampleAt(rng, []float64{0, 0.5, 0.999}, dst)
		if err != nil || mass != want {
			t.Fatalf("%s: SampleAt: mass %v, %v (want %v)", c.name, mass, err, want)
		}
		for j := range 3 {
			p := 1 / want
			if !c.uniform {
				p = float64(dst.Reward[j]+1) / want
			}
			if d := dst.Prob[j] - p; d > 1e-9 || d < -1e-9 {
				t.Errorf("%s: row %d (item %v): Prob %v, want %v", c.name, j, dst.Reward[j], dst.Prob[j], p)
			}
		}
		if dst.Reward[0] != 0 || dst.Reward[2] != 7 {
			t.Errorf("%s: positions 0 and 0.999 gave items %v and %v, want the first and the last", c.name, dst.Reward[0], dst.Reward[2])
		}
		if _, err := m.Positional.SampleAt(rng, []float64{0.5, 0.1, 0.2}, dst); !errors.Is(err, buffer.ErrShape) {
			t.Errorf("%s: descending positions: %v", c.name, err)
		}
	}
}
