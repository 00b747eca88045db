package sampler

import (
	"github.com/apexrl/apex/buffer"
)

// ReF-ER's options: C and A for every variant, D for those whose beta
// adapts (refer-1 and er fix beta at 1: D would steer nothing).
var (
	referCOption = Option{Name: "refer-c", Usage: "ReF-ER: C in c_max = 1 + C/(1 + A·k), the near-policy bound on rho (0: 4)"}
	referDOption = Option{Name: "refer-d", Usage: "ReF-ER: the far-policy fraction the penalty steers toward (0: 0.1)"}
	referAOption = Option{Name: "refer-a", Usage: "ReF-ER: annealing rate A of c_max and the learning rate (0: 5/steps, or 5e-7 without -steps and for td3)"}
)

// referDocs say what each variant is (the paper's ablations, §5).
var referDocs = [...]string{
	REFERFull:        "ReF-ER (Novati & Koumoutsakos 2019): steps of finished episodes, far-policy samples skipped and a KL penalty toward the behaviours",
	REFERSkipOnly:    "ReF-ER-1: Rule 1 alone, far-policy samples skipped, no KL penalty",
	REFERPenaltyOnly: "ReF-ER-2: Rule 2 alone, the KL penalty, rho clipped at 1e3",
	REFERNone:        "plain experience replay of finished episodes' steps with the recorded Gaussian behaviour (ReF-ER's control arm)",
}

// referSpec is the ReF-ER method of variant v (its name is v's). It pairs
// with V-RACER (its own losses; the default on continuous actions) and
// TD3 (the critics' loss, far rows weighted 0), not with SAC, whose
// actors do not record the behaviour density the importance ratios need,
// nor with discrete actions.
func referSpec(v REFERVariant) func() Spec {
	return func() Spec {
		opts := []Option{referCOption, referAOption}
		if v.AdaptsBeta() {
			opts = []Option{referCOption, referDOption, referAOption}
		}
		return Spec{
			Name:     v.String(),
			Doc:      referDocs[v],
			Options:  opts,
			Blocks:   []string{"REFER"},
			Learners: []string{"vracer", "td3"},
			Needs:    Needs{FinishedEpisodes: true, Behaviour: true, ExplorationSigma: 0.2}, // σ: the paper's DDPG arm (Alg. 4)
			Layout: func(_ MethodConfig, c *buffer.Config) {
				if c.Action == buffer.Continuous {
					c.Floats = REFERColumns(c.ActionDim) // the behaviour policy's mean and std, V(s_T)
				}
			},
			Build: func(buf *buffer.Buffer, cfg MethodConfig) (Method, error) {
				c := DefaultREFERConfig(cfg.BetaSteps)
				if cfg.REFER != nil {
					c = *cfg.REFER
				} else {
					setOption(&c.C, cfg, referCOption.Name)
					setOption(&c.D, cfg, referDOption.Name)
					setOption(&c.A, cfg, referAOption.Name)
					if cfg.Learner == "td3" {
						c.NoRetrace = true // TD3's critics keep their own targets
						// The paper's A for DDPG, not 5/Steps: annealing the
						// step size to 1/6 within a short run stops TD3
						// learning (Pendulum: no progress in 3e4 steps with
						// 5/Steps, about −200 without).
						if c.A == 0 {
							c.A = DefaultREFERA
						}
					}
				}
				c.Variant = v
				r, err := NewREFER(buf, c)
				if err != nil {
					return Method{}, err
				}
				return Method{Selector: r, Episodes: r}, nil
			},
		}
	}
}
