package sampler

import "github.com/apexrl/apex/buffer"

// TER's options.
var (
	terEtaOption   = Option{Name: "ter-eta", Usage: "ter: share of each batch drawn by PER, floor(eta*B) rows (0: 0.5)"}
	terRootsOption = Option{Name: "ter-roots", Usage: "ter: terminal vertices each reverse sweep starts from (0: 8)", Int: true}
	terPredsOption = Option{Name: "ter-preds", Usage: "ter: predecessors each expanded vertex contributes (0: 3)", Int: true}
)

// terSpec is Topological Experience Replay (Hong et al. 2022): reverse
// sweeps over a graph of state codes mixed with PER rows, with the
// learner's loss and importance weights on the PER rows.
func terSpec() Spec {
	return Spec{
		Name:              "ter",
		Doc:               "Topological Experience Replay (Hong et al. 2022): reverse sweeps from terminal states mixed with PER, the learner's loss",
		Options:           []Option{terEtaOption, terRootsOption, terPredsOption},
		Blocks:            []string{"TER"},
		Learners:          []string{"dqn", "td3", "sac"},
		ImportanceWeights: true,
		Layout: func(_ MethodConfig, c *buffer.Config) {
			c.StateHash = true // the graph's vertices
		},
		Build: func(buf *buffer.Buffer, cfg MethodConfig) (Method, error) {
			c := DefaultTERConfig(cfg.BetaSteps)
			if cfg.TER != nil {
				c = *cfg.TER
			} else {
				setOption(&c.Eta, cfg, terEtaOption.Name)
				setOption(&c.Roots, cfg, terRootsOption.Name)
				setOption(&c.Preds, cfg, terPredsOption.Name)
			}
			t, err := NewTER(buf, c)
			if err != nil {
				return Method{}, err
			}
			return Method{Selector: t, Weighter: t}, nil
		},
	}
}
