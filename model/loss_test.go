package model

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"
)

func TestLossValues(t *testing.T) {
	pred := []float64{0.5, 3, -2, 1}
	target := []float64{0, 0, 0, 1}
	// δ = 0.5, 3, -2, 0.
	cases := []struct {
		loss       Loss
		weight     []float64
		value      float64
		grad       []float64
		descriptor string
	}{
		// Huber(1): 0.125, 3-0.5, 2-0.5, 0 → mean 4.125/4.
		{Loss{}, nil, 4.125 / 4, []float64{0.5 / 4, 1.0 / 4, -1.0 / 4, 0}, "huber 1"},
		// Huber(2): 0.125, 2·(3-1)=4, δ=-2 is on the edge: 2, 0 → 6.125/4.
		{Loss{Delta: 2}, nil, 6.125 / 4, []float64{0.5 / 4, 2.0 / 4, -2.0 / 4, 0}, "huber 2"},
		// MSE: 0.25 + 9 + 4 + 0 = 13.25.
		{Loss{Kind: MSE}, nil, 13.25 / 4, []float64{1.0 / 4, 6.0 / 4, -4.0 / 4, 0}, "mse"},
		// Weighted Huber(1): 2·0.125 + 0·2.5 + 0.5·1.5 + 1·0 = 1.
		{Loss{}, []float64{2, 0, 0.5, 1}, 1.0 / 4, []float64{1.0 / 4, 0, -0.5 / 4, 0}, "weighted huber"},
	}
	for _, c := range cases {
		grad := make([]float64, len(pred))
		got := c.loss.Value(grad, pred, target, c.weight)
		if math.Abs(got-c.value) > 1e-15 {
			t.Errorf("%s: loss %g, want %g", c.descriptor, got, c.value)
		}
		for i := range grad {
			if math.Abs(grad[i]-c.grad[i]) > 1e-15 {
				t.Errorf("%s: grad[%d] = %g, want %g", c.descriptor, i, grad[i], c.grad[i])
			}
		}
		if v := c.loss.Value(nil, pred, target, c.weight); v != got {
			t.Errorf("%s: without grad %g, with %g", c.descriptor, v, got)
		}
	}
	// Unit weights are the same as none.
	ones := []float64{1, 1, 1, 1}
	if a, b := (Loss{}).Value(nil, pred, target, nil), (Loss{}).Value(nil, pred, target, ones); a != b {
		t.Errorf("nil weights %g, unit weights %g", a, b)
	}
}

func TestSelectedAndGather(t *testing.T) {
	q := []float64{
		1, 2, 3,
		4, 5, 6,
	}
	actions := []int32{2, 0}
	qa := make([]float64, 2)
	Gather(qa, q, actions)
	if qa[0] != 3 || qa[1] != 4 {
		t.Fatalf("Gather = %v, want [3 4]", qa)
	}
	target := []float64{2.5, 4}
	grad := make([]float64, len(q))
	l := Loss{Kind: MSE}.Selected(grad, q, actions, target, []float64{2, 1})
	// δ = 0.5, 0: loss = (2·0.25 + 0)/2; grad at (0,2) = 2·2·0.5/2 = 1.
	if l != 0.25 {
		t.Errorf("loss %g, want 0.25", l)
	}
	want := []float64{0, 0, 1, 0, 0, 0}
	for i := range want {
		if grad[i] != want[i] {
			t.Errorf("grad = %v, want %v", grad, want)
			break
		}
	}
}

func TestLossPanics(t *testing.T) {
	q := make([]float64, 6)
	for name, f := range map[string]func(){
		"empty":         func() { Loss{}.Value(nil, nil, nil, nil) },
		"pred length":   func() { Loss{}.Value(nil, q[:2], q[:3], nil) },
		"grad length":   func() { Loss{}.Value(q[:2], q[:3], q[:3], nil) },
		"weight length": func() { Loss{}.Value(nil, q[:3], q[:3], q[:1]) },
		"negative delta": func() {
			Loss{Delta: -1}.Value(nil, q[:3], q[:3], nil)
		},
		"bad kind":       func() { Loss{Kind: 9}.Value(nil, q[:3], q[:3], nil) },
		"action too big": func() { Loss{}.Selected(nil, q, []int32{0, 3}, q[:2], nil) },
		"action < 0":     func() { Loss{}.Selected(nil, q, []int32{-1, 0}, q[:2], nil) },
		"ragged q":       func() { Loss{}.Selected(nil, q[:5], []int32{0, 0}, q[:2], nil) },
		"gather":         func() { Gather(q[:2], q, []int32{0, 7}) },
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

func TestLossJSON(t *testing.T) {
	in := Loss{Kind: MSE}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"kind":"mse"}` {
		t.Errorf("json %s", b)
	}
	var out Loss
	if err := json.Unmarshal([]byte(`{"kind":"huber","delta":2}`), &out); err != nil || out != (Loss{Kind: Huber, Delta: 2}) {
		t.Errorf("decoded %+v, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"kind":"pal","delta":0.01,"alpha":0.6}`), &out); err != nil || out != (Loss{Kind: PAL, Delta: 0.01, Alpha: 0.6}) {
		t.Errorf("decoded %+v, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"kind":"l2"}`), &out); !errors.Is(err, ErrConfig) {
		t.Errorf("unknown kind: %v", err)
	}
	if err := (Loss{Delta: math.NaN()}).Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("NaN delta: %v", err)
	}
}

// TestLossPALAndL1 checks the PAL and L1 kinds against their closed forms
// and PAL's derivative against LAP's max(|δ|,k)^α · clip(δ, −k, k).
func TestLossPALAndL1(t *testing.T) {
	for _, k := range []float64{1, 0.01, 2} {
		for _, alpha := range []float64{0, 0.4, 0.6, 1} {
			l := Loss{Kind: PAL, Delta: k, Alpha: alpha}
			for _, d := range []float64{-7, -2, -k, -0.3 * k, 0, 0.5 * k, k, 1.5, 40} {
				a := math.Abs(d)
				want := 0.5 * math.Pow(k, alpha) * d * d
				if a > k {
					want = k * math.Pow(a, 1+alpha) / (1 + alpha)
				}
				if got := l.Rho(d); math.Abs(got-want) > 1e-12*math.Max(1, want) {
					t.Errorf("k=%g alpha=%g: rho(%g) = %g, want %g", k, alpha, d, got, want)
				}
				wantG := math.Pow(math.Max(a, k), alpha) * math.Max(-k, math.Min(k, d))
				if got := l.Derivative(d); math.Abs(got-wantG) > 1e-12*math.Max(1, math.Abs(wantG)) {
					t.Errorf("k=%g alpha=%g: rho'(%g) = %g, want %g", k, alpha, d, got, wantG)
				}
			}
		}
	}
	// PAL with alpha = 0 has Huber(k)'s gradient (its tail is k|δ|, not
	// k(|δ| − k/2): the same gradient, as in the paper's code).
	for _, d := range []float64{-3, -0.2, 0.7, 5} {
		if p, h := (Loss{Kind: PAL, Delta: 1}).Derivative(d), (Loss{Kind: Huber}).Derivative(d); p != h {
			t.Errorf("PAL(alpha 0)' %g != Huber' %g at %g", p, h, d)
		}
	}
	l1 := Loss{Kind: L1}
	grad := make([]float64, 3)
	v := l1.Value(grad, []float64{3, -1, 2}, []float64{1, 1, 2}, []float64{1, 2, 1})
	if want := (2 + 2*2 + 0) / 3.0; math.Abs(v-want) > 1e-15 {
		t.Errorf("L1 value %g, want %g", v, want)
	}
	if want := []float64{1.0 / 3, -2.0 / 3, 0}; !slices.Equal(grad, want) {
		t.Errorf("L1 grad %v, want %v", grad, want)
	}
	if err := (Loss{Kind: Huber, Alpha: 0.4}).Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("Alpha on Huber: %v", err)
	}
	if err := (Loss{Kind: PAL, Alpha: math.Inf(1)}).Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("infinite Alpha: %v", err)
	}
}
