package learner

import (
	"fmt"
	"io"
	"math"

	"github.com/apexrl/apex/model"
)

// SAC checkpoint format: one section of kind learner.SAC, version 1,
// framed like the DQN's (checkpoint.go): a JSON header (sacHeader: config,
// method name and loss, step, log α, counters, RNG), then nested
// sections: five networks (model.Net: policy, critic 1, critic 2, target
// critic 1, target critic 2) and four optimizers (model.Adam: policy,
// critic 1, critic 2, temperature).
//
// log α travels in the header as a JSON number, which Go's encoder writes
// in the shortest form that decodes to the same float64: the value
// round-trips bit for bit. As for the other learners, the buffer and the
// sampler stage are checkpointed by their own packages.
const sacKind = "learner.SAC"

// sacHeader is the JSON header of a SAC checkpoint.
type sacHeader struct {
	Config SACConfig `json:"config"`
	// Method and Loss are the replay method's Name and Loss.
	Method string     `json:"method"`
	Loss   model.Loss `json:"loss"`
	Steps  uint64     `json:"steps"`
	// LogAlpha is log α after the last step.
	LogAlpha float64 `json:"log_alpha"`
	// RNG is the learner stream's PCG state (rand.PCG.MarshalBinary).
	RNG   []byte   `json:"rng"`
	Stats SACStats `json:"stats"`
}

// sacNets lists the networks in checkpoint order, with their names.
func (l *SAC) sacNets() ([5]*model.Net, [5]string) {
	return [5]*model.Net{l.policy, l.critic[0], l.critic[1], l.criticTarg[0], l.criticTarg[1]},
		[5]string{"policy", "critic 1", "critic 2", "target critic 1", "target critic 2"}
}

// Save writes the learner's whole state to w: its configuration, the
// replay method's name and loss, its step count, temperature, counters and
// RNG state, the five networks and the four optimizers' moments (format
// above). Load on a learner built with the same configuration, method and
// network shapes continues the run bit for bit, given the same buffer
// contents. Call it while Step is not running. Cost: O(parameters),
// streamed.
func (l *SAC) Save(w io.Writer) error {
	if w == nil {
		return fmt.Errorf("%w: Save to a nil io.Writer", ErrConfig)
	}
	rng, err := l.pcg.MarshalBinary()
	if err != nil {
		return fmt.Errorf("learner: Save: %w", err)
	}
	st := l.Stats()
	for _, f := range []*float64{&st.CriticLoss, &st.PolicyLoss, &st.AlphaLoss, &st.Entropy, &st.MeanAbsTD, &st.MeanQ, &st.CriticGradNorm, &st.PolicyGradNorm} {
		*f = finite0(*f)
	}
	h := sacHeader{Config: l.cfg, Method: l.m.Name, Loss: l.m.Loss, Steps: l.steps, LogAlpha: l.logAlpha[0], RNG: rng, Stats: st}
	nets, names := l.sacNets()
	var parts []part
	for i, n := range nets {
		parts = append(parts, part{names[i], n.Save})
	}
	for i, a := range []*model.Adam{l.policyAdam, l.criticAdam[0], l.criticAdam[1], l.alphaAdam} {
		parts = append(parts, part{fmt.Sprintf("optimizer %d", i), a.Save})
	}
	return saveSection(w, sacKind, h, parts)
}

// Load restores a state written by Save into l, then publishes the
// restored policy (versioned by the restored step count) to the Store. It
// reads exactly the checkpoint's bytes from r, so other data may follow.
//
// The checkpoint must come from a SAC learner with the same configuration
// (after defaults), the same replay method (name and loss) and the same
// network shapes; otherwise the error wraps ErrMismatch and says what
// differs. The
// precision may differ (model.Config.Float32 of the networks): the saved
// float64 parameters load into the learner's networks as they are, and
// each optimizer is converted to its network's precision
// (model.Adam.SetFloat32: moments rounded to float32 or widened exactly). A stream that is not a valid SAC checkpoint (empty, truncated,
// another kind or a newer version, a file of the earlier format, bad
// checksum, inconsistent contents) is an error
// wrapping ErrCorrupt (and the model package's ErrCorrupt for a damaged
// network or optimizer). Networks with a NaN or infinite parameter,
// optimizers with a NaN or infinite moment or a negative second moment, a
// log α beyond ±700 (α not a positive finite float64), and counters no
// run could produce (a step or target-update counter other than the step
// count, an optimizer that took another number of steps, a recorded α
// other than e^{log α}) are refused with ErrCorrupt naming the field
// (model.ErrNonFinite too for a NaN or an infinity). Every length is
// bounded before it is allocated, as for DQN.Load. On any error l is left
// unchanged. Call it while Step is not running. Cost: O(parameters).
func (l *SAC) Load(r io.Reader) error {
	if r == nil {
		return fmt.Errorf("%w: Load from a nil io.Reader", ErrConfig)
	}
	return loadSection(r, sacKind, func(r io.Reader) (func(), error) {
		var h sacHeader
		if err := readHeader(r, &h); err != nil {
			return nil, err
		}
		pcg, err := checkReplayHead(h.Config, l.cfg, l.m, replayHead{h.Method, h.Loss, h.Steps, h.RNG,
			h.Stats.Steps, h.Stats.Version, h.Stats.Timing, &h.Stats.Sampled})
		if err != nil {
			return nil, err
		}
		switch {
		case h.Stats.TargetUpdates != h.Steps:
			return nil, errorf(ErrCorrupt, "stats.target_updates = %d, the step count is %d (one per step)", h.Stats.TargetUpdates, h.Steps)
		case !(math.Abs(h.LogAlpha) <= maxLogAlpha):
			return nil, errorf(ErrCorrupt, "log_alpha = %v (must be within ±%d)", h.LogAlpha, maxLogAlpha)
		case h.Stats.Alpha != math.Exp(h.LogAlpha):
			return nil, errorf(ErrCorrupt, "stats.alpha = %v, but log_alpha = %v gives %v", h.Stats.Alpha, h.LogAlpha, math.Exp(h.LogAlpha))
		}

		nets, names := l.sacNets()
		var loaded [5]*model.Net
		for i, n := range nets {
			if loaded[i], err = loadNet(r, names[i], n); err != nil {
				return nil, err
			}
		}
		policyAdam, err := loadAdam(r, "policy optimizer", l.policyAdam, h.Steps)
		if err != nil {
			return nil, err
		}
		var criticAdam [2]*model.Adam
		for k := range criticAdam {
			if criticAdam[k], err = loadAdam(r, fmt.Sprintf("critic %d optimizer", k+1), l.criticAdam[k], h.Steps); err != nil {
				return nil, err
			}
		}
		alphaAdam, err := loadAdam(r, "temperature optimizer", l.alphaAdam, h.Steps)
		if err != nil {
			return nil, err
		}

		return func() {
			// Everything read and checked: commit.
			for i, n := range nets {
				n.CopyFrom(loaded[i])
			}
			l.policyAdam, l.criticAdam, l.alphaAdam = policyAdam, criticAdam, alphaAdam
			*l.pcg = *pcg
			l.steps = h.Steps
			l.logAlpha[0] = h.LogAlpha
			c, s := &l.stats, h.Stats
			c.steps.Store(h.Steps)
			c.criticLoss.Store(floatBits(s.CriticLoss))
			c.policyLoss.Store(floatBits(s.PolicyLoss))
			c.alphaLoss.Store(floatBits(s.AlphaLoss))
			c.alpha.Store(floatBits(l.alpha()))
			c.entropy.Store(floatBits(s.Entropy))
			c.meanAbsTD.Store(floatBits(s.MeanAbsTD))
			c.meanQ.Store(floatBits(s.MeanQ))
			c.criticGradNorm.Store(floatBits(s.CriticGradNorm))
			c.policyGradNorm.Store(floatBits(s.PolicyGradNorm))
			c.writeBacks.Store(s.WriteBacks)
			c.stale.Store(s.StaleWriteBacks)
			c.publishes.Store(s.Publishes)
			c.version.Store(s.Version)
			c.targetUpdates.Store(s.TargetUpdates)
			c.timing.store(s.Timing)
			c.sampled.store(s.Sampled)
			l.publish()
		}, nil
	})
}
