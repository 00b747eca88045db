package sampler_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// TestBuiltinMethods: the built-in methods are registered in their
// documented order, each with a doc line, learners, and options that are
// shared only as the same Option.
func TestBuiltinMethods(t *testing.T) {
	want := []string{"uniform", "per", "rank", "lap", "pal", "ter", "refer", "refer-1", "refer-2", "er", "ners"}
	if got := sampler.Methods(); len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Fatalf("Methods() = %v, want %v first", got, want)
	}
	if _, ok := sampler.Lookup(sampler.DefaultMethod); !ok {
		t.Fatalf("DefaultMethod %q is not registered", sampler.DefaultMethod)
	}
	for _, name := range want {
		s, ok := sampler.Lookup(name)
		if !ok || s.Name != name || s.Doc == "" || len(s.Learners) == 0 || s.Build == nil {
			t.Errorf("%s: %+v", name, s)
		}
	}
	if got := sampler.OptionMethods("refer-d"); !slices.Equal(got, []string{"refer", "refer-2"}) {
		t.Errorf("refer-d is taken by %v, want refer and refer-2 (the variants whose beta adapts)", got)
	}
	if got := sampler.OptionMethods("lap-k"); !slices.Equal(got, []string{"lap", "pal"}) {
		t.Errorf("lap-k is taken by %v", got)
	}
	var names []string
	for _, o := range sampler.Options() {
		names = append(names, o.Name)
	}
	for _, n := range []string{"lap-alpha", "lap-k", "ter-eta", "ter-roots", "ter-preds", "refer-c", "refer-d", "refer-a", "ners-alpha", "ners-interval", "ners-sample"} {
		if !slices.Contains(names, n) {
			t.Errorf("Options() lacks %s: %v", n, names)
		}
	}
	if _, ok := sampler.Lookup("nope"); ok {
		t.Error("Lookup found an unregistered method")
	}
}

// TestRegisterRefuses: Register refuses a duplicate name, a conflicting
// option, and incomplete specs, each with a configuration error.
func TestRegisterRefuses(t *testing.T) {
	build := func(buf *buffer.Buffer, _ sampler.MethodConfig) (sampler.Method, error) {
		return sampler.Method{Selector: sampler.NewUniform(buf)}, nil
	}
	ok := sampler.Spec{Name: "registry-test-ok", Doc: "test", Learners: []string{"dqn"}, Build: build}
	for what, s := range map[string]sampler.Spec{
		"duplicate name": func() sampler.Spec { s := ok; s.Name = "per"; return s }(),
		"bad name":       func() sampler.Spec { s := ok; s.Name = "Bad Name"; return s }(),
		"no build":       func() sampler.Spec { s := ok; s.Build = nil; return s }(),
		"no learner":     func() sampler.Spec { s := ok; s.Learners = nil; return s }(),
		"conflicting option": func() sampler.Spec {
			s := ok
			s.Options = []sampler.Option{{Name: "ter-eta", Usage: "other"}}
			return s
		}(),
		"option twice": func() sampler.Spec {
			s := ok
			s.Options = []sampler.Option{{Name: "x-a", Usage: "a"}, {Name: "x-a", Usage: "a"}}
			return s
		}(),
		"option without help": func() sampler.Spec { s := ok; s.Options = []sampler.Option{{Name: "x-b"}}; return s }(),
		"unknown block":       func() sampler.Spec { s := ok; s.Blocks = []string{"FOO"}; return s }(),
		"bad stat":            func() sampler.Spec { s := ok; s.Stats = []sampler.Stat{{Name: "Bad-Name", Help: "x"}}; return s }(),
	} {
		if err := sampler.Register(s); !errors.Is(err, buffer.ErrConfig) {
			t.Errorf("%s: Register = %v, want a configuration error", what, err)
		}
	}
	if slices.Contains(sampler.Methods(), "registry-test-ok") || slices.Contains(sampler.Methods(), "Bad Name") {
		t.Error("a refused spec was registered")
	}
}

// The test method "registry-test" is registered once per test binary
// (-count=N runs the test again); registryTestOption is the option its
// Build last got.
var (
	registerOnce       sync.Once
	registerErr        error
	registryTestOption float64
)

// TestRegisteredMethodBuilds: a method registered here is built by
// NewMethod like a built-in one: its option reaches Build, a shared option
// (the same Option value as ter's) is accepted, another method's option and
// a block are refused, NoIS is refused without importance weights, and
// the PAL loss is refused for a method that takes the learner's loss.
func TestRegisteredMethodBuilds(t *testing.T) {
	registerOnce.Do(func() {
		registerErr = sampler.Register(sampler.Spec{Name: "registry-test", Doc: "test", Learners: []string{"dqn"},
			Options: []sampler.Option{{Name: "registry-test-k", Usage: "k (0: 1)"}},
			Build: func(buf *buffer.Buffer, cfg sampler.MethodConfig) (sampler.Method, error) {
				registryTestOption = cfg.Option("registry-test-k")
				u := sampler.NewUniform(buf)
				return sampler.Method{Selector: u, Weighter: u}, nil
			}})
	})
	if registerErr != nil {
		t.Fatal(registerErr)
	}
	if err := sampler.Register(sampler.Spec{Name: "registry-test", Learners: []string{"dqn"}, Build: func(*buffer.Buffer, sampler.MethodConfig) (sampler.Method, error) {
		return sampler.Method{}, nil
	}}); !errors.Is(err, buffer.ErrConfig) || !strings.Contains(err.Error(), "already registered") {
		t.Errorf("second registration: %v", err)
	}
	buf := samplertest.NewBuffer(t, 16)
	m, err := sampler.NewMethod("registry-test", buf, sampler.MethodConfig{Options: map[string]float64{"registry-test-k": 2.5}, Loss: model.Loss{Kind: model.MSE}})
	if err != nil || registryTestOption != 2.5 || m.Name != "registry-test" || m.Loss.Kind != model.MSE {
		t.Fatalf("NewMethod: %v, %v (option %v)", m, err, registryTestOption)
	}
	for what, cfg := range map[string]sampler.MethodConfig{
		"another method's option": {Options: map[string]float64{"ter-eta": 0.5}},
		"unknown option":          {Options: map[string]float64{"nope": 1}},
		"negative option":         {Options: map[string]float64{"registry-test-k": -1}},
		"a block":                 {PER: &sampler.PERConfig{}},
		"NoIS":                    {NoIS: true},
		"PAL loss":                {Loss: model.Loss{Kind: model.PAL, Alpha: 0.4}},
	} {
		if _, err := sampler.NewMethod("registry-test", buf, cfg); !errors.Is(err, buffer.ErrConfig) {
			t.Errorf("%s: %v, want a configuration error", what, err)
		}
	}
	if _, err := sampler.NewMethod("per", buf, sampler.MethodConfig{Options: map[string]float64{"registry-test-k": 1}}); err == nil ||
		!strings.Contains(err.Error(), "option registry-test-k configures registry-test only") {
		t.Errorf("per with the test method's option: %v", err)
	}
	if _, err := sampler.NewMethod("nope", buf, sampler.MethodConfig{}); err == nil || !strings.Contains(err.Error(), "registry-test") {
		t.Errorf("an unknown name's error lists the registered methods: %v", err)
	}
}

// TestMethodOptionsReachTheStage: each built-in method's options configure
// its stage as the typed block would.
func TestMethodOptionsReachTheStage(t *testing.T) {
	buf := samplertest.NewBuffer(t, 64)
	ter, err := sampler.NewMethod("ter", stateHashBuffer(t), sampler.MethodConfig{Options: map[string]float64{"ter-eta": 0.25, "ter-roots": 4, "ter-preds": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if c := ter.Selector.(*sampler.TER).Config(); c.Eta != 0.25 || c.Roots != 4 || c.Preds != 2 {
		t.Errorf("ter config %+v", c)
	}
	lap, err := sampler.NewMethod("lap", buf, sampler.MethodConfig{Options: map[string]float64{"lap-alpha": 0.6, "lap-k": 0.5}})
	if err != nil || lap.Loss != (model.Loss{Kind: model.Huber, Delta: 0.5}) || !strings.Contains(lap.Selector.String(), "0.6") {
		t.Errorf("lap: %v, %v", lap, err)
	}
	pal, err := sampler.NewMethod("pal", buf, sampler.MethodConfig{Options: map[string]float64{"lap-k": 2}})
	if err != nil || pal.Loss != (model.Loss{Kind: model.PAL, Delta: 2, Alpha: sampler.DefaultLAPAlpha}) || pal.Normalizer == nil {
		t.Errorf("pal: %v, %v", pal, err)
	}
	if _, err := sampler.NewMethod("lap", buf, sampler.MethodConfig{Options: map[string]float64{"lap-k": 1}, LAP: &sampler.LAPConfig{Alpha: 0.4, K: 1}}); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("an option and its block together: %v", err)
	}
	if _, err := sampler.NewMethod("ter", stateHashBuffer(t), sampler.MethodConfig{Options: map[string]float64{"ter-roots": 2.5}}); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("a fractional count: %v", err)
	}
	ners, err := sampler.NewMethod("ners", buf, sampler.MethodConfig{Options: map[string]float64{"ners-interval": 7}, Horizon: 50, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if c := ners.Selector.(*sampler.NERS).Config(); c.Interval != 7 || c.Horizon != 50 || c.Seed != 3 {
		t.Errorf("ners config %+v", c)
	}
	if ners.Features == nil || ners.Evaluated == nil || ners.State == nil || ners.Stats == nil {
		t.Errorf("ners declares Features %v, Evaluated %v, State %v, Stats %v: want all", ners.Features != nil, ners.Evaluated != nil, ners.State != nil, ners.Stats != nil)
	}
	if s, ok := sampler.NERSStatsOf(ners.Stats()); !ok || s != ners.Selector.(*sampler.NERS).Stats() {
		t.Errorf("ners stats round trip: %+v", s)
	}
	if lap.Features != nil || lap.Evaluated != nil || lap.State != nil || lap.Stats != nil {
		t.Error("lap declares capabilities it lacks")
	}
}

// stateHashBuffer is a small buffer storing state hashes (TER's layout).
func stateHashBuffer(t *testing.T) *buffer.Buffer {
	t.Helper()
	spec, _ := sampler.Lookup("ter")
	c := buffer.Config{Capacity: 64, ObsDim: 2, NumActions: 2, Episode: true}
	spec.Layout(sampler.MethodConfig{}, &c)
	b, err := buffer.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
