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

// TestNewMethodTER: "ter" pairs TER with the chosen loss and importance
// weights on its PER rows (none with NoIS), and needs state hashes.
func TestNewMethodTER(t *testing.T) {
	buf := terBuffer(t, 16, 0)
	m, err := sampler.NewMethod("ter", buf, sampler.MethodConfig{BetaSteps: 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Selector.(*sampler.TER); !ok || m.Weighter == nil || m.Loss != (model.Loss{}) || m.Validate() != nil {
		t.Fatalf("ter: %v (weighter %v)", m, m.Weighter != nil)
	}
	if !strings.HasPrefix(m.String(), "ter: ter(eta=0.5,roots=8,preds=3") {
		t.Errorf("String() = %q", m.String())
	}
	c := sampler.DefaultTERConfig(10)
	c.Eta, c.Preds = 0.1, 1
	m, err = sampler.NewMethod("ter", buf, sampler.MethodConfig{TER: &c, NoIS: true, Loss: model.Loss{Kind: model.MSE}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Weighter != nil || len(m.Warnings) != 1 || m.Selector.(*sampler.TER).Config().Preds != 1 {
		t.Errorf("ter with NoIS and MSE: weighter %v, warnings %q", m.Weighter != nil, m.Warnings)
	}
	if _, err := sampler.NewMethod("ter", samplertest.NewBuffer(t, 16), sampler.MethodConfig{}); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("ter over a buffer without state hashes: %v", err)
	}
	if _, err := sampler.NewMethod("ter", buf, sampler.MethodConfig{Loss: model.Loss{Kind: model.PAL}}); !errors.Is(err, buffer.ErrConfig) {
		t.Errorf("ter with the PAL loss: %v", err)
	}
}
