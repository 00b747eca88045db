package sampler

import (
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
)

// palSpec is PAL, LAP's uniform twin (Fujimoto et al. 2020): uniform
// selection with the PAL(k, alpha) loss scaled by its batch normaliser.
func palSpec() Spec {
	return Spec{
		Name:     "pal",
		Doc:      "PAL (Fujimoto et al. 2020): uniform selection with its own PAL(k, alpha) loss over the batch mean of max(|δ|, k)^alpha",
		Options:  []Option{lapAlphaOption, lapKOption},
		Blocks:   []string{"LAP"},
		Learners: []string{"dqn", "td3", "sac"},
		OwnLoss: func(cfg MethodConfig) (model.Loss, error) {
			l := lapConfigOf(cfg)
			return model.Loss{Kind: model.PAL, Delta: l.K, Alpha: l.Alpha}, nil
		},
		Build: func(buf *buffer.Buffer, cfg MethodConfig) (Method, error) {
			p, err := NewPAL(buf, lapConfigOf(cfg))
			if err != nil {
				return Method{}, err
			}
			return Method{Selector: p, Weighter: p, Normalizer: p, Positional: uniformAt{buf}}, nil
		},
	}
}
