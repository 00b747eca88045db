package sampler

import "github.com/apexrl/apex/buffer"

// perSpec is proportional prioritized replay (Schaul et al. 2016) with
// the learner's loss and importance weights.
func perSpec() Spec {
	return Spec{
		Name:              "per",
		Doc:               "proportional prioritized replay (Schaul et al. 2016) with the learner's loss and importance weights",
		Blocks:            []string{"PER"},
		Learners:          []string{"dqn", "td3", "sac"},
		ImportanceWeights: true,
		Build: func(buf *buffer.Buffer, cfg MethodConfig) (Method, error) {
			c := DefaultPERConfig(cfg.BetaSteps)
			if cfg.PER != nil {
				c = *cfg.PER
			}
			p, err := NewPER(buf, c)
			if err != nil {
				return Method{}, err
			}
			return Method{Selector: p, Weighter: p, Positional: proportionalAt{buf}}, nil
		},
	}
}

// DefaultMethod is the method a run takes when it names none: Ape-X's
// proportional prioritized replay (Horgan et al. 2018).
const DefaultMethod = "per"
