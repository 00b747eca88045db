package envs_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/internal/badinput"
)

// TestStepRefusesBadActions: every registered environment refuses a Step
// before Reset and every malformed action with an error, never a panic,
// and keeps working afterwards.
func TestStepRefusesBadActions(t *testing.T) {
	for _, name := range envs.Names() {
		e, err := envs.Make(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := badinput.NoPanic(t, name+" Step before Reset", func() error { _, err := e.Step(envs.Action{}); return err }); !errors.Is(err, envs.ErrNeedsReset) {
			t.Errorf("%s: Step before Reset: %v, want ErrNeedsReset", name, err)
		}
		e.Reset(1)
		var bad []envs.Action
		switch sp := e.ActionSpace().(type) {
		case envs.Discrete:
			bad = []envs.Action{{Index: -1}, {Index: sp.N}, {Index: math.MaxInt}, {Index: math.MinInt}, {Vec: []float64{0}}}
		case envs.Box:
			d := sp.Dim()
			bad = []envs.Action{{}, {Vec: make([]float64, d+1)}, {Vec: make([]float64, max(d-1, 0))}}
			for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				vec := make([]float64, d)
				vec[0] = v
				bad = append(bad, envs.Action{Vec: vec})
			}
		}
		for _, a := range bad {
			err := badinput.NoPanic(t, fmt.Sprintf("%s Step(%+v)", name, a), func() error { _, err := e.Step(a); return err })
			if !errors.Is(err, envs.ErrInvalidAction) {
				t.Errorf("%s: Step(%+v): %v, want ErrInvalidAction", name, a, err)
			}
		}
	}
}

// TestMakeRefusesBadOptions: out-of-range, non-finite and nil options are
// errors naming the option.
func TestMakeRefusesBadOptions(t *testing.T) {
	for _, c := range []struct {
		env  string
		opt  envs.Option
		text string
	}{
		{"CartPole-v1", nil, "nil Option"},
		{"CartPole-v1", envs.WithMaxSteps(-1), "WithMaxSteps(-1)"},
		{"CartPole-v1", envs.WithMaxSteps(math.MinInt), "WithMaxSteps"},
		{"NChain", envs.WithSize(math.MaxInt), "WithSize"},
		{"NChain", envs.WithSize(-3), "WithSize(-3)"},
		{"BlindCliffwalk", envs.WithSize(math.MaxInt), "WithSize"},
		{"KeyDoor", envs.WithSize(math.MaxInt), "WithSize"},
		{"KeyDoor", envs.WithGoalReward(math.NaN()), "WithGoalReward(NaN)"},
		{"KeyDoor", envs.WithGoalReward(math.Inf(-1)), "WithGoalReward(-Inf)"},
		{"CartPole-v1", envs.WithSize(4), "does not accept"},
	} {
		name := fmt.Sprintf("Make(%s, %s)", c.env, c.text)
		err := badinput.NoPanic(t, name, func() error { _, err := envs.Make(c.env, c.opt); return err })
		if !errors.Is(err, envs.ErrBadOption) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v, want ErrBadOption", name, err)
		}
	}
	if _, err := envs.Make("nope"); !errors.Is(err, envs.ErrUnknownEnv) {
		t.Errorf("Make(nope): %v, want ErrUnknownEnv", err)
	}
}

// TestLQRParamsRefuseNonFinite sets each float field of LQRParams to NaN
// and ±Inf and requires an error naming it.
func TestLQRParamsRefuseNonFinite(t *testing.T) {
	base := envs.DefaultLQRParams()
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.Float64 {
			continue
		}
		for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			p := base
			reflect.ValueOf(&p).Elem().Field(i).SetFloat(x)
			name := fmt.Sprintf("LQRParams.%s = %v", f.Name, x)
			err := badinput.NoPanic(t, name, p.Validate)
			if !errors.Is(err, envs.ErrBadOption) || !strings.Contains(err.Error(), f.Name) {
				t.Errorf("%s: %v, want ErrBadOption naming the field", name, err)
			}
			if _, err := envs.Make("LQR-v0", envs.WithLQR(p)); !errors.Is(err, envs.ErrBadOption) {
				t.Errorf("Make(LQR-v0) with %s: %v", name, err)
			}
		}
	}
}

// TestMalformedBox: a Box whose Low and High differ in length contains
// nothing and prints, without an index panic.
func TestMalformedBox(t *testing.T) {
	b := envs.Box{Low: []float64{0, 0}, High: []float64{1}}
	_ = badinput.NoPanic(t, "malformed Box", func() error {
		if b.Contains([]float64{0.5, 0.5}) || b.ContainsAction(envs.Action{Vec: []float64{0.5, 0.5}}) {
			t.Error("a malformed box contains a point")
		}
		if s := b.String(); !strings.Contains(s, "malformed") {
			t.Errorf("String = %q", s)
		}
		return nil
	})
}
