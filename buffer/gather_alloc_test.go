package buffer

import "testing"

func TestGatherNoAllocs(t *testing.T) {
	cfg := Config{Capacity: 64, ObsDim: 4, Floats: []FloatColumn{{"mu", 2}}}
	b := mustNew(t, cfg)
	tr := items(Config{Capacity: 64, ObsDim: 4}, 0, 64, nil)
	if err := b.Insert(tr); err != nil {
		t.Fatal(err)
	}
	bt := mustBatch(t, b, 8)
	if a := testing.AllocsPerRun(100, func() { b.GatherSlot(bt, 3, 5) }); a != 0 {
		t.Fatalf("GatherSlot allocates %v times per call", a)
	}
}
