package runtime

import (
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
