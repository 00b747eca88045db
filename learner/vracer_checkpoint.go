package learner

import (
	"fmt"
	"io"
)

// V-RACER checkpoint format: one section of kind learner.VRACER, version
// 1, framed like the DQN's (checkpoint.go): a JSON header (vracerHeader:
// config, method name, step, counters, RNG), then nested sections: the
// network (model.Net), the optimizer (model.Adam) and the ReF-ER
// controller (REFERController.Save: its step k and beta).
//
// The buffer is checkpointed by its own package. The REFER stage and the
// controller's per-step state are not: a stage built over a loaded buffer
// re-assembles the stored episodes, which the controller receives with
// rho = 1 and fresh Retrace targets; Load restores the controller (the
// step k, hence c_max and the learning-rate scale, and beta), and the
// first recount puts n_far right.
const vracerKind = "learner.VRACER"

// vracerHeader is the JSON header of a V-RACER checkpoint.
type vracerHeader struct {
	Config VRACERConfig `json:"config"`
	Method string       `json:"method"`
	Steps  uint64       `json:"steps"`
	// RNG is the learner stream's PCG state (rand.PCG.MarshalBinary).
	RNG   []byte      `json:"rng"`
	Stats VRACERStats `json:"stats"`
}

// Save writes the learner's state to w: its configuration, the replay
// method's name, its step count, its counters and RNG state, the network,
// Adam's moments and the ReF-ER controller's k and beta (format above).
// Call it while Step is not running. Cost: O(parameters).
func (l *VRACER) Save(w io.Writer) error {
	if w == nil {
		return fmt.Errorf("%w: Save to a nil io.Writer", ErrConfig)
	}
	rng, err := l.pcg.MarshalBinary()
	if err != nil {
		return fmt.Errorf("learner: Save: %w", err)
	}
	st := l.Stats()
	for _, f := range []*float64{&st.Loss, &st.PolicyLoss, &st.ValueLoss, &st.KLLoss, &st.MeanV, &st.MeanAbsAdv,
		&st.MeanRho, &st.NearFraction, &st.MeanKL, &st.Std, &st.LR, &st.GradNorm, &st.Beta, &st.CMax, &st.FarFraction} {
		*f = finite0(*f)
	}
	h := vracerHeader{Config: l.cfg, Method: l.m.Name, Steps: l.steps, RNG: rng, Stats: st}
	return saveSection(w, vracerKind, h, []part{{"network", l.net.Save}, {"optimizer", l.adam.Save}, {"ReF-ER controller", l.ctl.Save}})
}

// Load restores a state written by Save into l, sets the ReF-ER
// controller to the saved step and beta (REFERController.SetController),
// and publishes the restored network (versioned by the restored step
// count). It reads exactly the checkpoint's bytes from r.
//
// The checkpoint must come from a V-RACER learner with the same
// configuration (after defaults), the same replay method name and the
// same network shape (ErrMismatch otherwise). The
// precision may differ (model.Config.Float32 of the networks): the saved
// float64 parameters load into the learner's networks as they are, and
// each optimizer is converted to its network's precision
// (model.Adam.SetFloat32: moments rounded to float32 or widened exactly). A stream that is not a
// valid V-RACER checkpoint is an error wrapping ErrCorrupt; a network with
// a NaN or infinite parameter or non-zero std-parameter weights, an
// optimizer with a NaN or infinite moment or a negative second moment, and
// counters no run could produce are refused, naming the field. Every
// length is bounded before it is allocated, as for DQN.Load. On any error l and the controller are left unchanged. Call it while
// Step is not running. Cost: O(parameters).
func (l *VRACER) Load(r io.Reader) error {
	if r == nil {
		return fmt.Errorf("%w: Load from a nil io.Reader", ErrConfig)
	}
	return loadSection(r, vracerKind, func(r io.Reader) (func(), error) {
		var h vracerHeader
		if err := readHeader(r, &h); err != nil {
			return nil, err
		}
		pcg, err := checkHead(h.Config, l.cfg, h.RNG)
		if err != nil {
			return nil, err
		}
		if h.Method != l.m.Name {
			return nil, errorf(ErrMismatch, "method differs: saved %q, learner %q", h.Method, l.m.Name)
		}
		if h.Stats.Steps != h.Steps {
			return nil, errorf(ErrCorrupt, "counters of %d steps for step count %d", h.Stats.Steps, h.Steps)
		}
		if err := checkCounters(h.Steps, h.Stats.Steps, h.Stats.Version, h.Stats.Timing, nil); err != nil {
			return nil, err
		}
		net, err := loadNet(r, "network", l.net)
		if err != nil {
			return nil, err
		}
		for _, k := range l.stdW {
			if net.Params()[k] != 0 {
				return nil, errorf(ErrCorrupt, "network: the std parameters' weight %s is %g (must be 0)", net.Where(k), net.Params()[k])
			}
		}
		adam, err := loadAdam(r, "optimizer", l.adam, h.Steps)
		if err != nil {
			return nil, err
		}
		ctl, err := readReferState(r)
		if err != nil {
			return nil, err
		}
		if ctl.K != h.Steps {
			return nil, errorf(ErrCorrupt, "the ReF-ER controller is at step %d, the learner at %d", ctl.K, h.Steps)
		}

		return func() {
			// Everything read and checked: commit. The controller goes first (it
			// cannot fail: beta was checked above), so an error leaves all as it was.
			if err := l.ctl.SetController(ctl.K, ctl.Beta); err != nil {
				panic("learner: VRACER.Load: the ReF-ER controller refused a checked beta: " + err.Error())
			}
			l.net.CopyFrom(net)
			l.adam = adam
			*l.pcg = *pcg
			l.steps = h.Steps
			c, s := &l.stats, h.Stats
			c.steps.Store(h.Steps)
			c.loss.Store(floatBits(s.Loss))
			c.policyLoss.Store(floatBits(s.PolicyLoss))
			c.valueLoss.Store(floatBits(s.ValueLoss))
			c.klLoss.Store(floatBits(s.KLLoss))
			c.meanV.Store(floatBits(s.MeanV))
			c.meanAbsAdv.Store(floatBits(s.MeanAbsAdv))
			c.meanRho.Store(floatBits(s.MeanRho))
			c.nearFrac.Store(floatBits(s.NearFraction))
			c.meanKL.Store(floatBits(s.MeanKL))
			c.std.Store(floatBits(s.Std))
			c.lr.Store(floatBits(s.LR))
			c.gradNorm.Store(floatBits(s.GradNorm))
			c.beta.Store(floatBits(l.ctl.Beta()))
			c.cmax.Store(floatBits(l.ctl.CMax()))
			c.farFrac.Store(floatBits(s.FarFraction))
			c.publishes.Store(s.Publishes)
			c.version.Store(s.Version)
			c.timing.store(s.Timing)
			l.publish()
		}, nil
	})
}
