package learner

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/apexrl/apex/model"
)

func TestConfigDefaults(t *testing.T) {
	c, err := DQNConfig{}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	want := DQNConfig{
		Batch: DefaultBatch, LR: DefaultLR, ClipNorm: DefaultClipNorm,
		Adam:        model.AdamConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		TargetEvery: DefaultTargetEvery, PublishEvery: DefaultPublishEvery,
	}
	if c != want {
		t.Errorf("defaults %+v, want %+v", c, want)
	}
	if a := c.adamConfig(); a.LR != DefaultLR || a.ClipNorm != DefaultClipNorm {
		t.Errorf("Adam config %+v", a)
	}
	// A negative ClipNorm turns clipping off; Validate is idempotent.
	c, err = DQNConfig{ClipNorm: -1, Tau: 0.005}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if c.adamConfig().ClipNorm != 0 {
		t.Errorf("ClipNorm -1 gives Adam ClipNorm %v, want 0 (off)", c.adamConfig().ClipNorm)
	}
	if c2, err := c.Validate(); err != nil || c2 != c {
		t.Errorf("Validate is not idempotent: %+v, %v", c2, err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg   DQNConfig
		field string
	}{
		{DQNConfig{Batch: -1}, "Batch"},
		{DQNConfig{Batch: maxBatch + 1}, "Batch"},
		{DQNConfig{LR: -1e-3}, "LR"},
		{DQNConfig{LR: math.NaN()}, "LR"},
		{DQNConfig{LR: math.Inf(1)}, "LR"},
		{DQNConfig{ClipNorm: math.NaN()}, "ClipNorm"},
		{DQNConfig{Adam: model.AdamConfig{LR: 1e-3}}, "Adam.LR"},
		{DQNConfig{Adam: model.AdamConfig{ClipNorm: 1}}, "Adam.ClipNorm"},
		{DQNConfig{Adam: model.AdamConfig{Beta1: 1}}, "Beta1"},
		{DQNConfig{TargetEvery: -5}, "TargetEvery"},
		{DQNConfig{Tau: 1.5}, "Tau"},
		{DQNConfig{Tau: -0.1}, "Tau"},
		{DQNConfig{Tau: math.NaN()}, "Tau"},
		{DQNConfig{PublishEvery: -1}, "PublishEvery"},
	} {
		_, err := tc.cfg.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: Validate = %v, want an ErrConfig error naming %s", tc.cfg, err, tc.field)
		}
	}
}
