package ners

import (
	"flag"
	"testing"

	"github.com/apexrl/apex/sampler"
)

// TestScorerDrift: the authors' REINFORCE loss, −r·mean log σ, gives every
// row of I_train the same reward, so it moves the scores together: 48
// updates of reward +1 (the paper's count in 10k steps) change the scores
// far more than their spread over the rows, and the largest priority
// stays within 1.5x the smallest, for apex's widths and the code's. A
// common shift of every σ cancels in p_i = σ_i^α / Σ σ^α; only its size
// against new items' priority 1 changes what is drawn. Prints the figures
// (go test -v); -ners.codewidths adds the code's widths (about 20x the
// compute).
func TestScorerDrift(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5}
	cases := []struct {
		name string
		cfg  sampler.NERSNetConfig
	}{{"apex", sampler.NERSNetConfig{In: 12}}}
	if *codeWidths {
		cases = append(cases, struct {
			name string
			cfg  sampler.NERSNetConfig
		}{"code", CodeWidths(12)})
	}
	for _, c := range cases {
		for _, same := range []bool{true, false} {
			d, err := ScorerDrift(c.cfg, 128, 48, same, seeds)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s widths, %d updates, reward +1 each: %v; mean |Δσ| %.4f, Δsd(σ) %+.4f, max/min priority %.3f -> %.3f (seeds %v)",
				c.name, d.Updates, same, d.MeanAbsChange, d.SDChange, d.RatioBefore, d.RatioAfter, seeds)
			if d.RatioBefore > 1.5 || d.RatioAfter > 1.5 {
				t.Errorf("%s: priorities spread %.3f -> %.3f, want both below 1.5", c.name, d.RatioBefore, d.RatioAfter)
			}
			if same && !(d.MeanAbsChange > 10*max(d.SDChange, -d.SDChange)) {
				t.Errorf("%s: mean |Δσ| %.4f not 10x the change of spread %.4f", c.name, d.MeanAbsChange, d.SDChange)
			}
		}
	}
}

var codeWidths = flag.Bool("ners.codewidths", false, "TestScorerDrift: also the authors' code's scorer widths")
