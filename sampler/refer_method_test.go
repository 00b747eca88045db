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

func TestNewMethodREFER(t *testing.T) {
	buf := newREFERBuffer(t, 64, 2)
	for name, v := range map[string]sampler.REFERVariant{
		"refer": sampler.REFERFull, "refer-1": sampler.REFERSkipOnly, "refer-2": sampler.REFERPenaltyOnly, "er": sampler.REFERNone,
	} {
		for _, cfg := range []sampler.MethodConfig{{BetaSteps: 1000}, {REFER: &sampler.REFERConfig{Variant: sampler.REFERPenaltyOnly, C: 2}}} {
			m, err := sampler.NewMethod(name, buf, cfg)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			r, ok := m.Selector.(*sampler.REFER)
			if !ok || m.Episodes != sampler.EpisodeSource(r) || m.Episodes.Buffer() != buf || r.Config().Variant != v || m.Weighter != nil || m.Normalizer != nil || m.Loss != (model.Loss{}) || m.Validate() != nil {
				t.Fatalf("%s %+v: %v (variant %v)", name, cfg, m, r.Config().Variant)
			}
			if cfg.REFER == nil && r.Config().A != 5.0/1000 {
				t.Errorf("%s: A = %v from BetaSteps 1000", name, r.Config().A)
			}
			if cfg.REFER != nil && r.Config().C != 2 {
				t.Errorf("%s: C = %v, want the given 2", name, r.Config().C)
			}
			if !strings.HasPrefix(m.String(), name+": refer(variant="+v.String()) || !strings.HasSuffix(m.String(), "own loss") {
				t.Errorf("String() = %q", m.String())
			}
		}
	}
	for what, c := range map[string]struct {
		name string
		buf  *buffer.Buffer
		cfg  sampler.MethodConfig
	}{
		"the PAL loss":     {"refer", buf, sampler.MethodConfig{Loss: model.Loss{Kind: model.PAL, Delta: 1, Alpha: 0.4}}},
		"NoIS":             {"er", buf, sampler.MethodConfig{NoIS: true}},
		"discrete buffer":  {"refer", samplertest.NewBuffer(t, 16), sampler.MethodConfig{}},
		"bad REFER config": {"refer-2", buf, sampler.MethodConfig{REFER: &sampler.REFERConfig{D: 2}}},
	} {
		if _, err := sampler.NewMethod(c.name, c.buf, c.cfg); !errors.Is(err, buffer.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", what, err)
		}
	}
	// The other methods keep no episodes for a learner-side controller.
	for _, name := range []string{"uniform", "per", "lap"} {
		if m, err := sampler.NewMethod(name, samplertest.NewBuffer(t, 16), sampler.MethodConfig{}); err != nil || m.Episodes != nil {
			t.Errorf("%s: Episodes %v (err %v), want nil", name, m.Episodes, err)
		}
	}
	// A critic's loss (TD3 under ReF-ER) is the method's.
	m, err := sampler.NewMethod("refer", buf, sampler.MethodConfig{Loss: model.Loss{Kind: model.MSE}})
	if err != nil || m.Loss.Kind != model.MSE {
		t.Errorf("refer with MSE: %v, loss %v", err, m.Loss)
	}
}
