package ter

import (
	"bytes"
	"strings"
	"testing"
)

// TestCostSmoke runs a reduced cost measurement. The times are wall times
// (elapsed), so only their structure is asserted.
func TestCostSmoke(t *testing.T) {
	cfg := DefaultCostConfig()
	cfg.Capacity, cfg.Fill, cfg.Batches, cfg.Sizes = 4096, 5000, 30, []int{8, 32}
	res, err := RunCost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != len(CostMethods)*2 {
		t.Fatalf("%d rows, want %d", len(res.Rows), len(CostMethods)*2)
	}
	for i, r := range res.Rows {
		if r.Method != CostMethods[i/2] || r.Batch != cfg.Sizes[i%2] || r.Size != cfg.Capacity {
			t.Errorf("row %d: %s B=%d size %d", i, r.Method, r.Batch, r.Size)
		}
		if !(r.Min >= 0 && r.Min <= r.Median && r.Median <= r.Max && r.Min <= r.Mean && r.Mean <= r.Max && r.P99 <= r.Max && r.P99 >= r.Median && r.First >= 0 && r.Setup >= 0) {
			t.Errorf("%s B=%d: times %+v", r.Method, r.Batch, r)
		}
		switch r.Method {
		case "ter":
			if s := r.TER; s == nil || s.Transitions != cfg.Capacity || s.Vertices == 0 || s.Sweeps == 0 {
				t.Errorf("ter stats %+v", s)
			}
		case "ebu":
			if s := r.EBU; s == nil || s.Replayed+s.Uniform != (cfg.Batches+1)*r.Batch {
				t.Errorf("ebu stats %+v", s)
			}
		}
	}
	var b bytes.Buffer
	if err := WriteCostTable(&b, res); err != nil || !strings.Contains(b.String(), "ter") || !strings.Contains(b.String(), "median") {
		t.Errorf("table %q, %v", b.String(), err)
	}
}

func TestCostValidate(t *testing.T) {
	for name, mut := range map[string]func(*CostConfig){
		"no fill":        func(c *CostConfig) { c.Fill = 0 },
		"no batches":     func(c *CostConfig) { c.Batches = 0 },
		"negative":       func(c *CostConfig) { c.InsertsPerBatch = -1 },
		"batch too big":  func(c *CostConfig) { c.Sizes = []int{c.Capacity + 1} },
		"unknown method": func(c *CostConfig) { c.Methods = []string{"per-greedy"} },
		"no sizes":       func(c *CostConfig) { c.Sizes = nil },
		"bad env":        func(c *CostConfig) { c.Env, c.Fill, c.Capacity = "CartPole-v1", 100, 100; c.Sizes = []int{8} },
	} {
		c := DefaultCostConfig()
		mut(&c)
		if _, err := RunCost(c); err == nil {
			t.Errorf("%s: RunCost accepted %+v", name, c)
		}
	}
}
