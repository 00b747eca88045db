package cliffwalk

import (
	"math"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// RankRefreshFraction is how stale the rank order may grow here: a re-sort
// after changes to 10% of the items. PER keeps its order nearly sorted after
// every update (a binary heap); sampler.Rank re-sorts periodically, and its
// default period (one pass of changes) is sized for replay memories of 10^6
// where a sort costs ~0.1 s. At the Cliffwalk's few thousand items a sort
// costs microseconds, so the experiment tracks the paper's ordering more
// closely (at n = 12 the default period needs ~1.8x more updates).
const RankRefreshFraction = 0.1

// MaxRankSegments is the most rank segments used per update: PER's
// minibatch size k = 32, which sets its segment count.
const MaxRankSegments = 32

// Uniform replays every stored transition with probability 1/N
// (sampler.Uniform).
func Uniform() Agent {
	return Replay{Label: "uniform", New: func(buf *buffer.Buffer, _ int64) (sampler.Selector, error) {
		return sampler.NewUniform(buf), nil
	}}
}

// Proportional is PER's proportional variant (sampler.PER with
// sampler.DefaultPERConfig: alpha 0.6, eps 1e-6, weights normalised by the
// buffer maximum). With is, importance weights (N·P(i))^-beta scale each
// step, beta rising linearly from 0.4 to 1 over Task.BetaSteps updates;
// without, beta is 0 and every weight is 1. The paper gives no alpha or
// beta for the Cliffwalk; these are its Atari values (ours).
func Proportional(is bool) Agent {
	label := "prop"
	if is {
		label = "prop+IS"
	}
	return Replay{Label: label, New: func(buf *buffer.Buffer, betaSteps int64) (sampler.Selector, error) {
		c := sampler.DefaultPERConfig(betaSteps)
		if !is {
			c.Beta = sampler.Linear{}
		}
		return sampler.NewPER(buf, c)
	}}
}

// RankBased is PER's rank-based variant (sampler.Rank with
// sampler.DefaultRankConfig: alpha 0.7, eps 1e-6, buffer-normalised
// weights; rank order re-sorted after Task.RankRefresh of the items
// changed, by default 10%, see RankRefreshFraction). With is,
// beta rises from 0.5 to 1 over Task.BetaSteps updates; without, it is 0.
// Alpha and beta are PER's Atari values (ours).
//
// Rank selection cuts the power law into equal-mass segments, one batch row
// per segment, and samples uniformly inside a segment; a batch of one row
// would be a single segment, i.e. uniform replay. So each update draws
// RankSegments(N) rows and replays one of them at random (Replay.Draw),
// which is the paper's "sample a segment, then uniformly within it".
func RankBased(is bool) Agent {
	label := "rank"
	if is {
		label = "rank+IS"
	}
	return rankAgent{Replay: Replay{Label: label}, is: is}
}

// rankAgent sets Replay.Draw from the task's memory size and the stage's
// re-sort fraction from the task's.
type rankAgent struct {
	Replay
	is bool // with importance weights
}

func (r rankAgent) Learn(task *Task, q Table, rng *rand.Rand) (Outcome, error) {
	r.Draw = RankSegments(len(task.Memory), sampler.DefaultRankAlpha)
	refresh := task.RankRefresh
	r.New = func(buf *buffer.Buffer, betaSteps int64) (sampler.Selector, error) {
		c := sampler.DefaultRankConfig(betaSteps)
		c.RefreshFraction = refresh
		if !r.is {
			c.Beta = sampler.Linear{}
		}
		return sampler.NewRank(buf, c)
	}
	return r.Replay.Learn(task, q, rng)
}

// RankSegments is the number of equal-mass segments rank selection uses
// over n items: MaxRankSegments, but no more than floor(sum_{r<=n}
// r^-alpha) = floor(1/P(rank 1)). More segments than that cannot have mass
// 1/k each (the top item alone weighs more), and as k approaches n every
// segment holds one item and selection turns uniform. O(n).
func RankSegments(n int, alpha float64) int {
	var z float64
	for r := 1; r <= n; r++ {
		z += math.Pow(float64(r), -alpha)
	}
	return max(1, min(MaxRankSegments, int(z)))
}

// DefaultAgents are the agents of the default sweep, in column order:
// uniform; proportional and rank-based PER as in the paper's Cliffwalk
// (Schaul et al. §3.1-3.3: stochastic prioritization only; the
// importance-sampling correction is introduced afterwards, in §3.4); the
// same two with PER's importance weights, an ablation; and the oracle.
func DefaultAgents() []Agent {
	return []Agent{
		Uniform(),
		Proportional(false), RankBased(false),
		Proportional(true), RankBased(true),
		Oracle{},
	}
}

// DefaultLegend explains DefaultAgents' labels, for output under the table.
const DefaultLegend = `uniform     sampler.Uniform: every transition with probability 1/N
prop        sampler.PER proportional: alpha 0.6, eps 1e-6, no importance weights (the
            paper's Cliffwalk setting: IS correction comes later, in its section 3.4)
rank        sampler.Rank: alpha 0.7; each update draws one row per equal-mass segment
            (RankSegments: min(32, 1/P(rank 1))) and replays one of them at random
*+IS        ablation: the same with PER's importance weights, beta 0.4->1 (prop) or
            0.5->1 (rank) over -beta-steps updates, normalised by the buffer's largest
            weight; they shrink exactly the steps on high-priority transitions
oracle      replays the transition that most reduces MSE(Q, Q*) (O(N) per update)
alpha and beta are PER's Atari values (ours): the paper gives none for the Cliffwalk.
`
