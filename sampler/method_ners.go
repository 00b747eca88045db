package sampler

import "github.com/apexrl/apex/buffer"

// NERS's options.
var (
	nersAlphaOption    = Option{Name: "ners-alpha", Usage: "ners: exponent of priority = score^alpha (0: 0.5)"}
	nersIntervalOption = Option{Name: "ners-interval", Usage: "ners: fewest learner steps between two updates of the scorer, each at an evaluation (0: 1000)", Int: true}
	nersSampleOption   = Option{Name: "ners-sample", Usage: "ners: sampled items each update of the scorer trains on (0: 128)", Int: true}
)

// nersStats describe NERSStats as Method.Stats reports it.
var nersStats = []Stat{
	{"ners_updates_total", "NERS: REINFORCE updates of the scorer.", true},
	{"ners_reward", "NERS: replay reward (change of evaluation return) of the last scorer update.", false},
	{"ners_loss", "NERS: loss of the last scorer update, -r_re times the mean log sigma.", false},
	{"ners_train_rows", "NERS: items the last scorer update trained on, after dropping overwritten ones.", false},
	{"ners_ignored_evaluations_total", "NERS: evaluations that came sooner than the update interval.", true},
	{"ners_dropped_total", "NERS: training draws dropped because their item had been overwritten.", true},
	{"ners_score_min", "NERS: smallest score of the last batch written back.", false},
	{"ners_score_max", "NERS: largest score of the last batch written back.", false},
	{"ners_score_mean", "NERS: mean score of the last batch written back.", false},
}

// StatsMap is s keyed by the names of the ners method's Stats.
func (s NERSStats) StatsMap() map[string]float64 {
	return map[string]float64{
		"ners_updates_total": float64(s.Updates), "ners_reward": s.Reward, "ners_loss": s.Loss,
		"ners_train_rows": float64(s.TrainRows), "ners_ignored_evaluations_total": float64(s.Ignored),
		"ners_dropped_total": float64(s.Dropped), "ners_score_min": s.ScoreMin, "ners_score_max": s.ScoreMax,
		"ners_score_mean": s.ScoreMean,
	}
}

// nersSpec is NERS (Oh et al. 2021): a learned set scorer sets the
// priorities, trained by REINFORCE on the change of evaluation returns;
// the learner's loss and importance weights.
func nersSpec() Spec {
	return Spec{
		Name:              "ners",
		Doc:               "NERS (Oh et al. 2021): a learned set scorer sets the priorities, rewarded by evaluation returns; the learner's loss and importance weights",
		Options:           []Option{nersAlphaOption, nersIntervalOption, nersSampleOption},
		Blocks:            []string{"NERS"},
		Learners:          []string{"dqn", "td3", "sac"},
		ImportanceWeights: true,
		Stats:             nersStats,
		Build: func(buf *buffer.Buffer, cfg MethodConfig) (Method, error) {
			c := DefaultNERSConfig(cfg.BetaSteps)
			if cfg.NERS != nil {
				c = *cfg.NERS
			} else {
				setOption(&c.Alpha, cfg, nersAlphaOption.Name)
				setOption(&c.Interval, cfg, nersIntervalOption.Name)
				setOption(&c.TrainSize, cfg, nersSampleOption.Name)
				c.Horizon, c.ActionScale, c.Seed = cfg.Horizon, cfg.ActionScale, cfg.Seed
			}
			n, err := NewNERS(buf, c)
			if err != nil {
				return Method{}, err
			}
			return Method{Selector: n, Weighter: n, Features: n, Evaluated: n.Evaluated, State: n,
				Stats: func() map[string]float64 { return n.Stats().StatsMap() }}, nil
		},
	}
}

// NERSStatsOf is the NERSStats a ners method's Stats reported as m (the
// inverse of StatsMap), and whether m holds them.
func NERSStatsOf(m map[string]float64) (NERSStats, bool) {
	if _, ok := m["ners_updates_total"]; !ok {
		return NERSStats{}, false
	}
	return NERSStats{Updates: uint64(m["ners_updates_total"]), Reward: m["ners_reward"], Loss: m["ners_loss"],
		TrainRows: int(m["ners_train_rows"]), Ignored: uint64(m["ners_ignored_evaluations_total"]),
		Dropped: uint64(m["ners_dropped_total"]), ScoreMin: m["ners_score_min"], ScoreMax: m["ners_score_max"],
		ScoreMean: m["ners_score_mean"]}, true
}
