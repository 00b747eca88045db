package buffer

import (
	"math/rand/v2"
	"testing"
)

func TestImportanceWeightsExact(t *testing.T) {
	// PER §3.4 with alpha=1: priorities 1,2,3,4, N=4, beta=1 give
	// w = (4·p/10)^-1 / max = 1, .5, .3333, .25.
	cfg := Config{Capacity: 4, Stripes: 1, ObsDim: 1}
	b := mustNew(t, cfg)
	if err := b.Insert(items(cfg, 0, 4, func(i int) float64 { return float64(i + 1) })); err != nil {
		t.Fatal(err)
	}
	bt := mustBatch(t, b, 4)
	bt.Size = 4
	for slot := range 4 {
		if !b.GatherSlot(bt, slot, slot) {
			t.Fatal("unreadable")
		}
		_, p, _ := b.SlotPriority(slot)
		bt.Prob[slot] = p / b.TotalPriority()
	}
	m, _ := b.MinPriority()
	bt.MinProb = m / b.TotalPriority()
	want := []float64{1, 0.5, 1.0 / 3, 0.25}
	for _, norm := range []Normalization{NormalizeBuffer, NormalizeBatch} {
		if err := bt.ImportanceWeights(1, norm); err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			if !near(bt.Weight[i], w, 1e-12) {
				t.Fatalf("%v: weight[%d] = %v, want %v", norm, i, bt.Weight[i], w)
			}
		}
	}
	if err := bt.ImportanceWeights(1, NormalizeNone); err != nil || !near(bt.Weight[3], 1/1.6, 1e-12) {
		t.Fatalf("unnormalised weight %v (%v), want 1/1.6", bt.Weight[3], err)
	}
	if err := bt.ImportanceWeights(0, NormalizeBatch); err != nil || bt.Weight[0] != 1 || bt.Weight[3] != 1 {
		t.Fatalf("beta=0 must give all ones: %v %v", bt.Weight, err)
	}
	for _, beta := range []float64{-0.1, 1.1} {
		if err := bt.ImportanceWeights(beta, NormalizeBatch); err == nil {
			t.Fatalf("beta %v accepted", beta)
		}
	}
}

func TestImportanceWeightsBufferNormalisation(t *testing.T) {
	// The buffer maximum is taken over every stored item, so a batch that
	// misses the smallest priority gets weights below 1.
	cfg := Config{Capacity: 64, ObsDim: 1}
	b := mustNew(t, cfg)
	if err := b.Insert(items(cfg, 0, 64, func(i int) float64 { return 1 + float64(i) })); err != nil {
		t.Fatal(err)
	}
	bt := mustBatch(t, b, 8)
	if err := b.Sample(rand.New(rand.NewPCG(9, 9)), bt); err != nil {
		t.Fatal(err)
	}
	if err := bt.ImportanceWeights(0.7, NormalizeBuffer); err != nil {
		t.Fatal(err)
	}
	total := 64.0 * 65 / 2
	wmax := pow(64*1/total, -0.7)
	for i := range 8 {
		if want := pow(64*bt.Prob[i], -0.7) / wmax; !near(bt.Weight[i], want, 1e-12) || bt.Weight[i] > 1 {
			t.Fatalf("weight[%d] = %v, want %v", i, bt.Weight[i], want)
		}
	}
	nb := mustNew(t, Config{Capacity: 64, ObsDim: 1, NoMinTree: true})
	if err := nb.Insert(items(cfg, 0, 64, func(i int) float64 { return 1 })); err != nil {
		t.Fatal(err)
	}
	bt2 := mustBatch(t, nb, 8)
	if err := nb.Sample(rand.New(rand.NewPCG(9, 9)), bt2); err != nil {
		t.Fatal(err)
	}
	if err := bt2.ImportanceWeights(0.5, NormalizeBuffer); err == nil {
		t.Fatal("NormalizeBuffer without a min tree must fail")
	}
}
