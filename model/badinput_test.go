package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/apexrl/apex/internal/badinput"
)

// TestConfigsRefuseNonFinite sets every float field of AdamConfig, Loss
// and SGD to NaN and ±Inf and requires an ErrConfig error naming it.
func TestConfigsRefuseNonFinite(t *testing.T) {
	check := func(v any, validate func(v any) error) {
		typ := reflect.TypeOf(v)
		n := 0
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Type.Kind() != reflect.Float64 {
				continue
			}
			n++
			for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				c := reflect.New(typ).Elem()
				c.Set(reflect.ValueOf(v))
				c.Field(i).SetFloat(x)
				name := fmt.Sprintf("%s.%s = %v", typ.Name(), f.Name, x)
				err := badinput.NoPanic(t, name, func() error { return validate(c.Interface()) })
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), f.Name) {
					t.Errorf("%s: %v, want ErrConfig naming the field", name, err)
				}
			}
		}
		if n == 0 {
			t.Fatalf("%T: no float fields", v)
		}
	}
	check(AdamConfig{}, func(v any) error { _, err := v.(AdamConfig).Validate(); return err })
	check(Loss{Kind: PAL}, func(v any) error { return v.(Loss).Validate() })
	check(SGD{LR: 0.1}, func(v any) error {
		_, err := v.(SGD).Step(make([]float64, 2), make([]float64, 2))
		return err
	})
}

// TestBadInputReturnsErrors: constructors and the calls that return an
// error refuse bad input with one instead of panicking.
func TestBadInputReturnsErrors(t *testing.T) {
	net, err := NewNet(Config{In: 2, Hidden: []int{4}, Out: 2}, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	adam, err := NewAdam(net.NumParams(), AdamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		f    func() error
		is   error
		text string
	}{
		{"NewNet huge widths", func() error {
			_, err := NewNet(Config{In: math.MaxInt, Hidden: []int{math.MaxInt}, Out: math.MaxInt}, nil)
			return err
		}, ErrConfig, "more than 268435456 parameters"},
		{"NewNet 2^28+ parameters", func() error {
			_, err := NewNet(Config{In: 1 << 14, Hidden: []int{1 << 14, 1 << 14}, Out: 1}, nil)
			return err
		}, ErrConfig, "more than 268435456 parameters"},
		{"NewNet too deep", func() error {
			_, err := NewNet(Config{In: 1, Hidden: make([]int, 5000), Out: 1}, nil)
			return err
		}, ErrConfig, "5000 layers"},
		{"NewNet negative In", func() error { _, err := NewNet(Config{In: -1, Out: 1}, nil); return err }, ErrConfig, "In = -1"},
		{"NewAdam negative", func() error { _, err := NewAdam(-5, AdamConfig{}); return err }, ErrConfig, "-5 parameters"},
		{"NewAdam huge", func() error { _, err := NewAdam(math.MaxInt, AdamConfig{}); return err }, ErrConfig, "parameters"},
		{"NewDense huge", func() error { _, err := NewDense(math.MaxInt, 2, ReLU, nil, nil); return err }, ErrConfig, "more than"},
		{"SetParams(nil)", func() error { return net.SetParams(nil) }, ErrShape, "nil"},
		{"SetParams short", func() error { return net.SetParams(NewParams(1, []float64{1})) }, ErrShape, "1 parameters"},
		{"Adam.Step short", func() error { _, err := adam.Step(net.Params(), nil); return err }, ErrShape, "len(grads) = 0"},
		{"SGD.Step mismatch", func() error { _, err := (SGD{LR: 1}).Step(make([]float64, 2), nil); return err }, ErrShape, "len(grads) = 0"},
		{"SGD.Step zero LR", func() error { _, err := (SGD{}).Step(nil, nil); return err }, ErrConfig, "SGD.LR = 0"},
		{"ClipGradNorm NaN", func() error { _, err := ClipGradNorm([]float64{1}, math.NaN()); return err }, nil, "NaN"},
		{"ParseActivation", func() error { _, err := ParseActivation("nope"); return err }, nil, "nope"},
	} {
		err := badinput.NoPanic(t, c.name, c.f)
		switch {
		case err == nil:
			t.Errorf("%s: no error", c.name)
		case c.is != nil && !errors.Is(err, c.is):
			t.Errorf("%s: %v, want %v", c.name, err, c.is)
		case !strings.Contains(err.Error(), c.text):
			t.Errorf("%s: %q does not say %q", c.name, err, c.text)
		}
	}
	if s := adam.Steps(); s != 0 {
		t.Fatalf("refused steps counted: Steps = %d", s)
	}
}

// TestNilReaderWriter: the checkpoint calls refuse a nil reader or
// writer with ErrConfig instead of panicking.
func TestNilReaderWriter(t *testing.T) {
	n, err := NewNet(Config{In: 2, Hidden: []int{3}, Out: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAdam(n.NumParams(), AdamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func() error{
		"Net.Save(nil)":  func() error { return n.Save(nil) },
		"Adam.Save(nil)": func() error { return a.Save(nil) },
		"LoadNet(nil)":   func() error { _, err := LoadNet(nil); return err },
		"LoadAdam(nil)":  func() error { _, err := LoadAdam(nil); return err },
	} {
		if err := badinput.NoPanic(t, name, f); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}
