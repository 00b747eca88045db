package sampler_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

func TestNewMethodPairings(t *testing.T) {
	buf := samplertest.NewBuffer(t, 16)
	lap := sampler.LAPConfig{Alpha: 0.6, K: 0.01}
	for _, c := range []struct {
		name     string
		cfg      sampler.MethodConfig
		loss     model.Loss
		weighted bool // has a Weighter
		norm     bool // has a Normalizer
	}{
		{"uniform", sampler.MethodConfig{}, model.Loss{}, true, false},
		{"uniform", sampler.MethodConfig{Loss: model.Loss{Kind: model.MSE}}, model.Loss{Kind: model.MSE}, true, false},
		{"per", sampler.MethodConfig{BetaSteps: 10}, model.Loss{}, true, false},
		{"per", sampler.MethodConfig{Loss: model.Loss{Kind: model.MSE}, NoIS: true}, model.Loss{Kind: model.MSE}, false, false},
		{"rank", sampler.MethodConfig{Loss: model.Loss{Kind: model.L1}}, model.Loss{Kind: model.L1}, true, false},
		{"lap", sampler.MethodConfig{}, model.Loss{Kind: model.Huber, Delta: 1}, false, false},
		{"lap", sampler.MethodConfig{LAP: &lap}, model.Loss{Kind: model.Huber, Delta: 0.01}, false, false},
		{"pal", sampler.MethodConfig{LAP: &lap}, model.Loss{Kind: model.PAL, Delta: 0.01, Alpha: 0.6}, true, true},
		{"pal", sampler.MethodConfig{LAP: &lap, Loss: model.Loss{Kind: model.PAL, Delta: 0.01, Alpha: 0.6}}, model.Loss{Kind: model.PAL, Delta: 0.01, Alpha: 0.6}, true, true},
	} {
		m, err := sampler.NewMethod(c.name, buf, c.cfg)
		if err != nil {
			t.Errorf("%s %+v: %v", c.name, c.cfg, err)
			continue
		}
		if m.Name != c.name || m.Loss != c.loss || (m.Weighter != nil) != c.weighted || (m.Normalizer != nil) != c.norm || m.Validate() != nil {
			t.Errorf("%s %+v: got %v (loss %+v, weighter %v, normalizer %v)", c.name, c.cfg, m, m.Loss, m.Weighter != nil, m.Normalizer != nil)
		}
		if !strings.HasPrefix(m.String(), c.name+": ") {
			t.Errorf("String() = %q", m.String())
		}
	}
}

func TestNewMethodWarnsPrioritizedMSEWithoutIS(t *testing.T) {
	buf := samplertest.NewBuffer(t, 16)
	m, err := sampler.NewMethod("per", buf, sampler.MethodConfig{Loss: model.Loss{Kind: model.MSE}, NoIS: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "Theorem 3") {
		t.Errorf("warnings %q", m.Warnings)
	}
	for _, c := range []sampler.MethodConfig{{Loss: model.Loss{Kind: model.MSE}}, {NoIS: true}} {
		if m, _ := sampler.NewMethod("per", buf, c); len(m.Warnings) != 0 {
			t.Errorf("%+v: unexpected warnings %q", c, m.Warnings)
		}
	}
}

func TestNewMethodRejects(t *testing.T) {
	buf := samplertest.NewBuffer(t, 16)
	lap := sampler.LAPConfig{Alpha: 0.4, K: 1}
	for what, c := range map[string]struct {
		name string
		cfg  sampler.MethodConfig
	}{
		"unknown name":        {"pel", sampler.MethodConfig{}},
		"PAL loss on uniform": {"uniform", sampler.MethodConfig{Loss: model.Loss{Kind: model.PAL, Alpha: 0.4}}},
		"PAL loss on per":     {"per", sampler.MethodConfig{Loss: model.Loss{Kind: model.PAL, Alpha: 0.4}}},
		"MSE on lap":          {"lap", sampler.MethodConfig{Loss: model.Loss{Kind: model.MSE}}},
		"lap with another k":  {"lap", sampler.MethodConfig{LAP: &lap, Loss: model.Loss{Kind: model.Huber, Delta: 2}}},
		"pal with another alpha": {"pal", sampler.MethodConfig{LAP: &lap,
			Loss: model.Loss{Kind: model.PAL, Delta: 1, Alpha: 0.6}}},
		"Huber(2) on pal":       {"pal", sampler.MethodConfig{Loss: model.Loss{Kind: model.Huber, Delta: 2}}},
		"NoIS on lap":           {"lap", sampler.MethodConfig{NoIS: true}},
		"NoIS on uniform":       {"uniform", sampler.MethodConfig{NoIS: true}},
		"bad lap config":        {"lap", sampler.MethodConfig{LAP: &sampler.LAPConfig{Alpha: 0.4}}},
		"bad loss":              {"uniform", sampler.MethodConfig{Loss: model.Loss{Kind: model.Huber, Delta: -1}}},
		"bad per config":        {"per", sampler.MethodConfig{PER: &sampler.PERConfig{Alpha: -1}}},
		"bad rank config":       {"rank", sampler.MethodConfig{Rank: &sampler.RankConfig{Alpha: -1}}},
		"alpha on huber":        {"per", sampler.MethodConfig{Loss: model.Loss{Kind: model.Huber, Alpha: 0.4}}},
		"floor above max 1":     {"lap", sampler.MethodConfig{LAP: &sampler.LAPConfig{Alpha: 1, K: 3}}},
		"LAP block on per":      {"per", sampler.MethodConfig{LAP: &lap}},
		"PER block on rank":     {"rank", sampler.MethodConfig{PER: &sampler.PERConfig{}}},
		"TER block on per":      {"per", sampler.MethodConfig{TER: &sampler.TERConfig{}}},
		"NERS block on uniform": {"uniform", sampler.MethodConfig{NERS: &sampler.NERSConfig{}}},
		"REFER block on ners":   {"ners", sampler.MethodConfig{REFER: &sampler.REFERConfig{}}},
		"Rank block on lap":     {"lap", sampler.MethodConfig{Rank: &sampler.RankConfig{}}},
	} {
		if _, err := sampler.NewMethod(c.name, buf, c.cfg); !errors.Is(err, buffer.ErrConfig) && !errors.Is(err, model.ErrConfig) {
			t.Errorf("%s: NewMethod(%q) error %v, want a config error", what, c.name, err)
		}
	}
	if _, err := sampler.NewMethod("uniform", nil, sampler.MethodConfig{}); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("nil buffer: %v", err)
	}
	if err := (sampler.Method{Name: "x"}).Validate(); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("Method without a Selector validated: %v", err)
	}
}
