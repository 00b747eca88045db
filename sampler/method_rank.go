package sampler

import "github.com/apexrl/apex/buffer"

// rankSpec is rank-based prioritized replay (Schaul et al. 2016) with the
// learner's loss and importance weights.
func rankSpec() Spec {
	return Spec{
		Name:              "rank",
		Doc:               "rank-based prioritized replay (Schaul et al. 2016) with the learner's loss and importance weights",
		Blocks:            []string{"Rank"},
		Learners:          []string{"dqn", "td3", "sac"},
		ImportanceWeights: true,
		Build: func(buf *buffer.Buffer, cfg MethodConfig) (Method, error) {
			c := DefaultRankConfig(cfg.BetaSteps)
			if cfg.Rank != nil {
				c = *cfg.Rank
			}
			r, err := NewRank(buf, c)
			if err != nil {
				return Method{}, err
			}
			return Method{Selector: r, Weighter: r}, nil
		},
	}
}
