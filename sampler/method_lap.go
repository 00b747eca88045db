package sampler

import (
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
)

// LAP's and PAL's options, shared by the two methods (each other's twin,
// Fujimoto et al. 2020).
var (
	lapAlphaOption = Option{Name: "lap-alpha", Usage: "alpha of lap and pal (0: 0.4)"}
	lapKOption     = Option{Name: "lap-k", Usage: "k of lap and pal (0: 1)"}
)

// lapConfigOf is LAP's configuration (lap and pal) from cfg: its LAP
// block, else its options over DefaultLAPConfig.
func lapConfigOf(cfg MethodConfig) LAPConfig {
	if cfg.LAP != nil {
		return *cfg.LAP
	}
	l := DefaultLAPConfig()
	setOption(&l.Alpha, cfg, lapAlphaOption.Name)
	setOption(&l.K, cfg, lapKOption.Name)
	return l
}

// lapSpec is LAP (Fujimoto et al. 2020, arXiv:2007.06049): priorities
// max(|δ|, k)^alpha with the Huber(k) loss and no importance weights.
func lapSpec() Spec {
	return Spec{
		Name:     "lap",
		Doc:      "LAP (Fujimoto et al. 2020): priority max(|δ|, k)^alpha with its own Huber(k) loss, no importance weights",
		Options:  []Option{lapAlphaOption, lapKOption},
		Blocks:   []string{"LAP"},
		Learners: []string{"dqn", "td3", "sac"},
		OwnLoss: func(cfg MethodConfig) (model.Loss, error) {
			return model.Loss{Kind: model.Huber, Delta: lapConfigOf(cfg).K}, nil
		},
		Layout: func(cfg MethodConfig, c *buffer.Config) {
			// LAP stores no priority below K^Alpha, new items' included:
			// with K > 1 the running maximum starts at that floor.
			if f := lapConfigOf(cfg).Floor(); f > 1 {
				c.InitialPriority = f
			}
		},
		Build: func(buf *buffer.Buffer, cfg MethodConfig) (Method, error) {
			l, err := NewLAP(buf, lapConfigOf(cfg))
			if err != nil {
				return Method{}, err
			}
			return Method{Selector: l, Positional: proportionalAt{buf}}, nil
		},
	}
}
