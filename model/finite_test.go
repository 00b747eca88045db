package model

import (
	"errors"
	"math"
	"testing"
)

func TestNonFinite(t *testing.T) {
	if err := CheckFinite("x", []float64{1, -2, math.MaxFloat64}); err != nil {
		t.Fatal(err)
	}
	err := CheckFinite("td errors", []float64{1, 2, math.Inf(-1), math.NaN()})
	var nf *NonFiniteError
	if !errors.As(err, &nf) || nf.Index != 2 || !errors.Is(err, ErrNonFinite) {
		t.Fatalf("%v", err)
	}
	if got := err.Error(); got != "model: td errors[2] is -Inf" {
		t.Errorf("message %q", got)
	}
	if err := CheckFiniteValue("loss", 0.5); err != nil {
		t.Fatal(err)
	}
	if got := CheckFiniteValue("loss", math.NaN()).Error(); got != "model: loss is NaN" {
		t.Errorf("message %q", got)
	}

	// A network names the parameter's layer and position.
	net, _ := NewNet(Config{In: 3, Hidden: []int{4}, Out: 2, Dueling: true}, nil)
	if err := net.CheckFinite(); err != nil {
		t.Fatal(err)
	}
	// trunk 0: W 3×4 (0..11), b (12..15); value 0: W 4×1 (16..19), b (20);
	// advantage 0: W 4×2 (21..28), b (29, 30).
	for i, want := range map[int]string{
		0: "trunk 0 W[0,0]", 7: "trunk 0 W[1,3]", 13: "trunk 0 b[1]",
		18: "value 0 W[2,0]", 20: "value 0 b[0]", 24: "advantage 0 W[1,1]", 30: "advantage 0 b[1]",
	} {
		if got := net.Where(i); got != want {
			t.Errorf("Where(%d) = %q, want %q", i, got, want)
		}
	}
	net.Params()[24] = math.Inf(1)
	if got := net.CheckFinite().Error(); got != "model: params[24] (advantage 0 W[1,1]) is +Inf" {
		t.Errorf("message %q", got)
	}
	net.Grads()[13] = math.NaN()
	if got := net.CheckGrads().Error(); got != "model: gradient[13] (trunk 0 b[1]) is NaN" {
		t.Errorf("message %q", got)
	}
	if net.NumParams() != 31 {
		t.Errorf("NumParams = %d", net.NumParams())
	}

	// NaN inputs propagate to the outputs (never silently become numbers).
	plain, _ := NewNet(Config{In: 2, Hidden: []int{3}, Out: 2}, nil)
	if err := CheckFinite("q", plain.Forward([]float64{math.NaN(), 1})); err == nil {
		// zero weights: 0·NaN is NaN
		t.Error("a NaN input gave finite outputs")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{
		{In: 0, Out: 2},
		{In: 2, Out: 0},
		{In: 2, Out: 2, Hidden: []int{3, 0}},
		{In: 2, Out: 2, Act: 9},
		{In: 2, Out: 2, Dueling: true, OutAct: Tanh},
		{In: 2, Out: 2, StreamHidden: []int{3}},
		{In: 2, Out: 2, Dueling: true, StreamHidden: []int{-1}},
		{In: 1 << 20, Out: 1 << 20},
	} {
		if _, err := NewNet(c, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("NewNet(%+v): %v", c, err)
		}
	}
	c, err := Config{In: 2, Out: 3, Hidden: []int{4}}.Validate()
	if err != nil || c.Act != ReLU || c.OutAct != Identity {
		t.Errorf("defaults: %+v %v", c, err)
	}
}

func TestArgmax(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		q    []float64
		want int
	}{
		{[]float64{1}, 0},
		{[]float64{1, 3, 2}, 1},
		{[]float64{3, 3}, 0},
		{[]float64{nan, 1, 2}, 2},
		{[]float64{1, nan, 0}, 0},
		{[]float64{nan, nan}, 0},
	} {
		if got := Argmax(c.q); got != c.want {
			t.Errorf("Argmax(%v) = %d, want %d", c.q, got, c.want)
		}
	}
}
