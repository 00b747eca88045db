package learner

import (
	"fmt"
	"io"

	"github.com/apexrl/apex/model"
)

// TD3 checkpoint format: one section of kind learner.TD3, version 1,
// framed like the DQN's (checkpoint.go): a JSON header (td3Header: config,
// method name and loss, step, counters, RNG), then nested sections: six
// networks (model.Net: actor, target actor, critic 1, critic 2, target
// critic 1, target critic 2), three optimizers (model.Adam: actor, critic
// 1, critic 2) and, under a ReF-ER method, the ReF-ER controller
// (REFERController.Save: its step k and beta). As for the DQN, the buffer
// and the sampler stage are checkpointed by their own packages.
const td3Kind = "learner.TD3"

// td3Header is the JSON header of a TD3 checkpoint.
type td3Header struct {
	Config TD3Config `json:"config"`
	// Method and Loss are the replay method's Name and Loss.
	Method string     `json:"method"`
	Loss   model.Loss `json:"loss"`
	Steps  uint64     `json:"steps"`
	// RNG is the learner stream's PCG state (rand.PCG.MarshalBinary).
	RNG   []byte   `json:"rng"`
	Stats TD3Stats `json:"stats"`
}

// td3Nets lists the networks in checkpoint order, with their names.
func (l *TD3) td3Nets() ([6]*model.Net, [6]string) {
	return [6]*model.Net{l.actor, l.actorTarg, l.critic[0], l.critic[1], l.criticTarg[0], l.criticTarg[1]},
		[6]string{"actor", "target actor", "critic 1", "critic 2", "target critic 1", "target critic 2"}
}

// Save writes the learner's whole state to w: its configuration, the
// replay method's name and loss, its step count, counters and RNG state,
// the six networks, the three optimizers' moments and, under ReF-ER, the
// controller's k and beta (format above). Load
// on a learner built with the same configuration, method and network
// shapes continues the run bit for bit, given the same buffer contents.
// Call it while Step is not running. Cost: O(parameters),
// streamed.
func (l *TD3) Save(w io.Writer) error {
	if w == nil {
		return fmt.Errorf("%w: Save to a nil io.Writer", ErrConfig)
	}
	rng, err := l.pcg.MarshalBinary()
	if err != nil {
		return fmt.Errorf("learner: Save: %w", err)
	}
	st := l.Stats()
	for _, f := range []*float64{&st.CriticLoss, &st.ActorLoss, &st.MeanAbsTD, &st.MeanQ, &st.CriticGradNorm, &st.ActorGradNorm} {
		*f = finite0(*f)
	}
	h := td3Header{Config: l.cfg, Method: l.m.Name, Loss: l.m.Loss, Steps: l.steps, RNG: rng, Stats: st}
	nets, names := l.td3Nets()
	var parts []part
	for i, n := range nets {
		parts = append(parts, part{names[i], n.Save})
	}
	for i, a := range []*model.Adam{l.actorAdam, l.criticAdam[0], l.criticAdam[1]} {
		parts = append(parts, part{fmt.Sprintf("optimizer %d", i), a.Save})
	}
	if l.refer != nil {
		parts = append(parts, part{"ReF-ER controller", l.refer.ctl.Save})
	}
	return saveSection(w, td3Kind, h, parts)
}

// Load restores a state written by Save into l, then publishes the
// restored actor (versioned by the restored step count) to the Store. It
// reads exactly the checkpoint's bytes from r, so other data may follow.
//
// The checkpoint must come from a TD3 learner with the same configuration
// (after defaults), the same replay method (name and loss) and the same
// network shapes; otherwise the error wraps ErrMismatch and says what
// differs. The
// precision may differ (model.Config.Float32 of the networks): the saved
// float64 parameters load into the learner's networks as they are, and
// each optimizer is converted to its network's precision
// (model.Adam.SetFloat32: moments rounded to float32 or widened exactly). A stream that is not a valid TD3 checkpoint (empty, truncated,
// another kind or a newer version, a file of the earlier format, bad
// checksum, inconsistent contents) is an error
// wrapping ErrCorrupt (and the model package's ErrCorrupt for a damaged
// network or optimizer). Networks with a NaN or infinite parameter,
// optimizers with a NaN or infinite moment or a negative second moment,
// and counters no run could produce are refused with ErrCorrupt naming the
// field (model.ErrNonFinite too for a NaN or an infinity). Every length
// is bounded before it is allocated, as for DQN.Load. On any error l is
// left unchanged. Call it
// while Step is not running. Cost: O(parameters).
func (l *TD3) Load(r io.Reader) error {
	if r == nil {
		return fmt.Errorf("%w: Load from a nil io.Reader", ErrConfig)
	}
	return loadSection(r, td3Kind, func(r io.Reader) (func(), error) {
		var h td3Header
		if err := readHeader(r, &h); err != nil {
			return nil, err
		}
		pcg, err := checkReplayHead(h.Config, l.cfg, l.m, replayHead{h.Method, h.Loss, h.Steps, h.RNG,
			h.Stats.Steps, h.Stats.Version, h.Stats.Timing, &h.Stats.Sampled})
		if err != nil {
			return nil, err
		}
		actorUpdates := h.Steps / uint64(l.cfg.PolicyDelay)
		if h.Stats.ActorUpdates != actorUpdates || h.Stats.Steps != h.Steps {
			return nil, errorf(ErrCorrupt, "counters (%d steps, %d actor updates) do not match the step count %d and PolicyDelay %d",
				h.Stats.Steps, h.Stats.ActorUpdates, h.Steps, l.cfg.PolicyDelay)
		}

		nets, names := l.td3Nets()
		var loaded [6]*model.Net
		for i, n := range nets {
			if loaded[i], err = loadNet(r, names[i], n); err != nil {
				return nil, err
			}
		}
		actorAdam, err := loadAdam(r, "actor optimizer", l.actorAdam, actorUpdates)
		if err != nil {
			return nil, err
		}
		var criticAdam [2]*model.Adam
		for k := range criticAdam {
			if criticAdam[k], err = loadAdam(r, fmt.Sprintf("critic %d optimizer", k+1), l.criticAdam[k], h.Steps); err != nil {
				return nil, err
			}
		}

		var ctl referState
		if l.refer != nil {
			if ctl, err = readReferState(r); err != nil {
				return nil, err
			}
			if ctl.K != h.Steps {
				return nil, errorf(ErrCorrupt, "the ReF-ER controller is at step %d, the learner at %d", ctl.K, h.Steps)
			}
		}
		return func() {
			// Everything read and checked: commit. The ReF-ER controller goes first
			// (it cannot fail: beta was checked above), so an error leaves all as it
			// was.
			if l.refer != nil {
				if err := l.refer.ctl.SetController(ctl.K, ctl.Beta); err != nil {
					panic("learner: TD3.Load: the ReF-ER controller refused a checked beta: " + err.Error())
				}
			}
			for i, n := range nets {
				n.CopyFrom(loaded[i])
			}
			l.actorAdam, l.criticAdam = actorAdam, criticAdam
			*l.pcg = *pcg
			l.steps, l.actorUpdates = h.Steps, actorUpdates
			c, s := &l.stats, h.Stats
			c.steps.Store(h.Steps)
			c.criticLoss.Store(floatBits(s.CriticLoss))
			c.actorLoss.Store(floatBits(s.ActorLoss))
			c.meanAbsTD.Store(floatBits(s.MeanAbsTD))
			c.meanQ.Store(floatBits(s.MeanQ))
			c.criticGradNorm.Store(floatBits(s.CriticGradNorm))
			c.actorGradNorm.Store(floatBits(s.ActorGradNorm))
			c.writeBacks.Store(s.WriteBacks)
			c.stale.Store(s.StaleWriteBacks)
			c.publishes.Store(s.Publishes)
			c.version.Store(s.Version)
			c.actorUpdates.Store(s.ActorUpdates)
			c.targetUpdates.Store(s.TargetUpdates)
			c.timing.store(s.Timing)
			c.sampled.store(s.Sampled)
			l.publish()
		}, nil
	})
}
