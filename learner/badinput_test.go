package learner

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/badinput"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

func TestConfigsRefuseNonFinite(t *testing.T) {
	badinput.CheckNonFinite(t, DQNConfig{}, ErrConfig, func(c DQNConfig) error { _, err := c.Validate(); return err })
	badinput.CheckNonFinite(t, TD3Config{MaxAction: 1}, ErrConfig, func(c TD3Config) error { _, err := c.Validate(); return err })
	badinput.CheckNonFinite(t, VRACERConfig{}, ErrConfig, func(c VRACERConfig) error { _, err := c.Validate(); return err })
	badinput.CheckNonFinite(t, SACConfig{MaxAction: 1}, ErrConfig, func(c SACConfig) error { _, err := c.Validate(); return err })
}

// TestConstructorsRefuseNil: the constructors refuse missing parts with
// ErrConfig rather than panicking.
func TestConstructorsRefuseNil(t *testing.T) {
	buf := newBuffer(t, 64, 2)
	net := linearNet(t, 2, 2, make([]float64, model.DenseParams(2, 2)))
	uni := sampler.Method{Name: "uniform", Selector: sampler.NewUniform(buf)}
	for name, f := range map[string]func() error{
		"NewDQN nil net":       func() error { _, err := NewDQN(DQNConfig{}, nil, buf, uni, nil); return err },
		"NewDQN nil buf":       func() error { _, err := NewDQN(DQNConfig{}, net, nil, uni, nil); return err },
		"NewDQN no selector":   func() error { _, err := NewDQN(DQNConfig{}, net, buf, sampler.Method{}, nil); return err },
		"NewTD3 nil nets":      func() error { _, err := NewTD3(TD3Config{}, nil, nil, buf, uni, nil); return err },
		"NewVRACER nil net":    func() error { _, err := NewVRACER(VRACERConfig{}, nil, buf, uni, nil); return err },
		"NewVRACER nil buf":    func() error { _, err := NewVRACER(VRACERConfig{}, net, nil, uni, nil); return err },
		"NewVRACERNet width 0": func() error { _, err := NewVRACERNet(0, 1, nil, rand.New(rand.NewPCG(1, 1))); return err },
		"NewVRACERNet nil rng": func() error { _, err := NewVRACERNet(2, 1, nil, nil); return err },
		"NewDQN huge batch":    func() error { _, err := NewDQN(DQNConfig{Batch: math.MaxInt}, net, buf, uni, nil); return err },
	} {
		// The package's own ErrConfig, or model's for a network it builds.
		if err := badinput.NoPanic(t, name, f); !errors.Is(err, ErrConfig) && !errors.Is(err, model.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// TestStepNilContext: a nil context is refused, not dereferenced.
func TestStepNilContext(t *testing.T) {
	r := newRig(t, DQNConfig{Batch: 4}, model.Config{In: 2, Out: 2}, 16)
	err := badinput.NoPanic(t, "Step(nil)", func() error { return r.l.Step(nilContext()) })
	if err == nil || !strings.Contains(err.Error(), "nil context") {
		t.Fatalf("Step(nil): %v, want an error about the nil context", err)
	}
}

// nilContext hides the nil from vet.
func nilContext() context.Context { return nil }

// blockingSelector is a uniform stage whose Sample waits until released,
// so a test can hold one Step in flight.
type blockingSelector struct {
	*sampler.Uniform
	entered chan struct{}
	release chan struct{}
}

func (s blockingSelector) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	s.entered <- struct{}{}
	<-s.release
	return s.Uniform.Sample(rng, dst)
}

// TestOverlappingStepIsRefused: a Step called while another is running is
// refused with ErrBusy instead of racing on the learner's state, and the
// learner works normally afterwards.
func TestOverlappingStepIsRefused(t *testing.T) {
	buf := newBuffer(t, 64, 2)
	fillRandom(t, buf, rand.New(rand.NewPCG(1, 1)), 32, 2, 2)
	net := linearNet(t, 2, 2, make([]float64, model.DenseParams(2, 2)))
	sel := blockingSelector{Uniform: sampler.NewUniform(buf), entered: make(chan struct{}), release: make(chan struct{})}
	l, err := NewDQN(DQNConfig{Batch: 4}, net, buf, sampler.Method{Name: "blocking", Selector: sel}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- l.Step(context.Background()) }()
	<-sel.entered
	err = l.Step(context.Background())
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "Step called while Step is running") {
		t.Fatalf("overlapping Step: %v, want ErrBusy", err)
	}
	close(sel.release)
	if err := <-done; err != nil {
		t.Fatalf("the first Step: %v", err)
	}
	if l.Steps() != 1 {
		t.Fatalf("Steps = %d, want 1 (the refused call does not count)", l.Steps())
	}
	go func() { <-sel.entered }()
	if err := l.Step(context.Background()); err != nil {
		t.Fatalf("a Step after the overlap: %v", err)
	}
}

// intVariants returns copies of cfg with each int field set to v.
func intVariants[C any](cfg C, v int64) map[string]C {
	out := map[string]C{}
	typ := reflect.TypeOf(cfg)
	for i := range typ.NumField() {
		switch typ.Field(i).Type.Kind() {
		case reflect.Int, reflect.Int64:
			c := cfg
			reflect.ValueOf(&c).Elem().Field(i).SetInt(v)
			out[typ.Field(i).Name] = c
		}
	}
	return out
}

// TestConstructorsSurviveExtremeCounts: each int field of each config set
// to the largest or smallest int builds a learner or returns an error,
// never panics or allocates without bound.
func TestConstructorsSurviveExtremeCounts(t *testing.T) {
	for _, v := range []int64{math.MaxInt64, math.MinInt64} {
		buf := newBuffer(t, 64, 2)
		net := linearNet(t, 2, 2, make([]float64, model.DenseParams(2, 2)))
		uni := sampler.Method{Name: "uniform", Selector: sampler.NewUniform(buf)}
		for name, c := range intVariants(DQNConfig{}, v) {
			err := badinput.NoPanic(t, "DQN "+name, func() error { _, err := NewDQN(c, net, buf, uni, nil); return err })
			if name == "Batch" && !errors.Is(err, ErrConfig) {
				t.Errorf("DQN Batch = %d: %v, want ErrConfig", v, err)
			}
		}
		cbuf := contBuffer(t, 64, 3, 2, 0)
		actor, critic := td3Nets(t, 3, 2, []int{4}, model.ReLU, 1)
		for name, c := range intVariants(TD3Config{MaxAction: 1}, v) {
			err := badinput.NoPanic(t, "TD3 "+name, func() error {
				_, err := NewTD3(c, actor, critic, cbuf, td3Method(t, "uniform", cbuf, nil), nil)
				return err
			})
			if name == "Batch" && !errors.Is(err, ErrConfig) {
				t.Errorf("TD3 Batch = %d: %v, want ErrConfig", v, err)
			}
		}
		rbuf := referBuffer(t, 64, 2, 1)
		vnet, err := NewVRACERNet(2, 1, []int{4}, rand.New(rand.NewPCG(1, 1)))
		if err != nil {
			t.Fatal(err)
		}
		for name, c := range intVariants(VRACERConfig{}, v) {
			err := badinput.NoPanic(t, "VRACER "+name, func() error {
				_, err := NewVRACER(c, vnet, rbuf, referMethod(t, rbuf, sampler.REFERConfig{}), nil)
				return err
			})
			if name == "Batch" && !errors.Is(err, ErrConfig) {
				t.Errorf("VRACER Batch = %d: %v, want ErrConfig", v, err)
			}
		}
	}
}

// TestNilReaderWriter: Save and Load refuse a nil writer or reader with
// ErrConfig instead of panicking.
func TestNilReaderWriter(t *testing.T) {
	buf := newBuffer(t, 4, 2)
	insert(t, buf, handItems...)
	dqn := newHand(t, DQNConfig{Batch: 4}, sampler.NewUniform(buf), nil, buf)
	td3 := newTD3Rig(t, TD3Config{Batch: 8}, "uniform", 16).l
	for name, f := range map[string]func() error{
		"DQN.Save(nil)": func() error { return dqn.Save(nil) },
		"DQN.Load(nil)": func() error { return dqn.Load(nil) },
		"TD3.Save(nil)": func() error { return td3.Save(nil) },
		"TD3.Load(nil)": func() error { return td3.Load(nil) },
	} {
		if err := badinput.NoPanic(t, name, f); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}
