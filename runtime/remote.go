package runtime

import (
	"fmt"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// The parts a distributed run's hosts need from the run's configuration
// beyond ReplayCore, LearnerHost and ActorHost, each resolved from cfg
// exactly as those are.

// ReplayLayout is the replay buffer's layout of the run cfg describes (the
// columns the method's Spec asks for, Capacity cfg.Capacity): what an
// actor host encodes its inserts for. Cost: resolving cfg (one
// environment).
func ReplayLayout(cfg TrainConfig) (buffer.Config, error) {
	p, err := resolve(cfg)
	if err != nil {
		return buffer.Config{}, err
	}
	return p.layout, nil
}

// NewLocalMethod builds the run's replay method over a small buffer of
// the run's layout: a remote learner takes its Loss and Normalizer (and
// the Selector's Priority and String) from it, while the stage itself runs
// in the replay server. Cost: resolving cfg plus a buffer of at most
// max(Batch, 1024) items.
func NewLocalMethod(cfg TrainConfig) (sampler.Method, error) {
	p, err := resolve(cfg)
	if err != nil {
		return sampler.Method{}, err
	}
	return p.localMethod()
}

// CheckRemote refuses a run the network path cannot carry yet: the
// methods that replay finished episodes through their recorded behaviour
// (ReF-ER's refer, refer-1, refer-2 and er), whose learners read and
// rewrite whole stored episodes in the buffer, which the remote stage
// does not expose. nil for every other method. Cost: resolving cfg.
func CheckRemote(cfg TrainConfig) error {
	p, err := resolve(cfg)
	if err != nil {
		return err
	}
	if n := p.spec.Needs; n.FinishedEpisodes || n.Behaviour {
		return fmt.Errorf("runtime: the replay method %q replays whole episodes through their recorded behaviour (its learner reads and rewrites the stored episodes), which a remote replay stage does not carry: train it with apex train", cfg.Sampler)
	}
	return nil
}
