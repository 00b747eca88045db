package learner

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"reflect"

	"github.com/apexrl/apex/checkpoint"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// Checkpoint format: one section of the checkpoint package's format (its
// magic, kind, version, chunked payload and CRC-32C) per learner:
//
//	learner.DQN version 1: JSON header (dqnHeader: config, method name
//	         and loss, step, counters, RNG), then three nested sections:
//	         the online network and the target network (model.Net), the
//	         optimizer (model.Adam)
//
// The other learners follow the same pattern (td3_checkpoint.go,
// vracer_checkpoint.go, sac_checkpoint.go). The learner's state is all of
// that; the buffer (items, priorities) and the sampler stage (whose state
// lives in the buffer, or is a function of the step, like PER's beta) are
// checkpointed by their own packages. Files of the earlier format (magic
// APEXDQNL, APEXTD3L, APEXVRCL or APEXSACL) are refused with an error that
// names it (checkpoint.LegacyError).
const (
	dqnKind     = "learner.DQN"
	ckVersion   = 1
	ckMaxHeader = 1 << 20
)

// dqnHeader is the JSON header of a checkpoint.
type dqnHeader struct {
	Config DQNConfig `json:"config"`
	// Method and Loss are the replay method's Name and Loss: a checkpoint
	// only continues under the method it was trained with.
	Method string     `json:"method"`
	Loss   model.Loss `json:"loss"`
	Steps  uint64     `json:"steps"`
	// RNG is the sampling stream's PCG state (rand.PCG.MarshalBinary).
	RNG   []byte   `json:"rng"`
	Stats DQNStats `json:"stats"`
}

// Save writes the learner's state to w: its configuration, the replay
// method's name and loss, its step count, counters and sampling RNG state,
// the online and target networks and Adam's moments (format above). Load
// on a learner built with the same configuration and network shape
// continues the run bit for bit, given the same buffer contents. Call it
// while Step is not running. Cost: O(parameters), streamed through one
// chunk of at most 1 MiB per nesting level.
func (l *DQN) Save(w io.Writer) error {
	if w == nil {
		return fmt.Errorf("%w: Save to a nil io.Writer", ErrConfig)
	}
	rng, err := l.pcg.MarshalBinary()
	if err != nil {
		return fmt.Errorf("learner: Save: %w", err)
	}
	st := l.Stats()
	st.Loss, st.MeanAbsTD, st.MeanQ, st.GradNorm = finite0(st.Loss), finite0(st.MeanAbsTD), finite0(st.MeanQ), finite0(st.GradNorm)
	h := dqnHeader{Config: l.cfg, Method: l.m.Name, Loss: l.m.Loss, Steps: l.steps, RNG: rng, Stats: st}
	return saveSection(w, dqnKind, h, []part{
		{"online network", l.net.Save}, {"target network", l.target.Save}, {"optimizer", l.adam.Save},
	})
}

// Load restores a state written by Save into l, then publishes the
// restored parameters (versioned by the restored step count) to the Store.
// It reads exactly the checkpoint's bytes from r, so other data may follow.
//
// The checkpoint must come from a learner with the same configuration
// (after defaults), the same replay method (name and loss) and the same
// network shape; otherwise the error wraps ErrMismatch and says what
// differs. The
// precision may differ (model.Config.Float32 of the networks): the saved
// float64 parameters load into the learner's networks as they are, and
// each optimizer is converted to its network's precision
// (model.Adam.SetFloat32: moments rounded to float32 or widened exactly). A stream that is not a valid checkpoint (empty, truncated,
// another kind or a newer version, a file of the earlier format, bad
// checksum, inconsistent contents) is an error wrapping ErrCorrupt (and
// the model package's ErrCorrupt for a damaged network or optimizer).
// Networks with a NaN or infinite parameter, optimizers with a NaN or
// infinite moment or a negative second moment, and counters no run could
// produce (a step counter other than the step count, a negative time or
// sum) are refused with ErrCorrupt naming the field (model.ErrNonFinite
// too for a NaN or an infinity). Every length is bounded before it is
// allocated (1 MiB of header; each network and optimizer as model.LoadNet
// and LoadAdam bound them), so a damaged or hostile stream costs about what
// it holds. On any error l is left unchanged. Call it while Step is not
// running.
func (l *DQN) Load(r io.Reader) error {
	if r == nil {
		return fmt.Errorf("%w: Load from a nil io.Reader", ErrConfig)
	}
	return loadSection(r, dqnKind, func(r io.Reader) (func(), error) {
		var h dqnHeader
		if err := readHeader(r, &h); err != nil {
			return nil, err
		}
		pcg, err := checkReplayHead(h.Config, l.cfg, l.m, replayHead{h.Method, h.Loss, h.Steps, h.RNG,
			h.Stats.Steps, h.Stats.Version, h.Stats.Timing, &h.Stats.Sampled})
		if err != nil {
			return nil, err
		}
		online, err := loadNet(r, "online network", l.net)
		if err != nil {
			return nil, err
		}
		target, err := loadNet(r, "target network", l.net)
		if err != nil {
			return nil, err
		}
		adam, err := loadAdam(r, "optimizer", l.adam, h.Steps)
		if err != nil {
			return nil, err
		}
		return func() {
			l.net.CopyFrom(online)
			l.target.CopyFrom(target)
			l.adam = adam
			*l.pcg = *pcg
			l.steps = h.Steps
			c, s := &l.stats, h.Stats
			c.steps.Store(h.Steps)
			c.loss.Store(floatBits(s.Loss))
			c.meanAbsTD.Store(floatBits(s.MeanAbsTD))
			c.meanQ.Store(floatBits(s.MeanQ))
			c.gradNorm.Store(floatBits(s.GradNorm))
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

// part is one nested piece of a learner's checkpoint: a network or an
// optimizer, written by its own Save.
type part struct {
	name string
	save func(io.Writer) error
}

// saveSection writes a learner's section of the given kind: the JSON
// header h, then each part's own section.
func saveSection(w io.Writer, kind string, h any, parts []part) error {
	err := checkpoint.Save(w, kind, ckVersion, func(w io.Writer) error {
		if err := checkpoint.WriteJSON(w, h); err != nil {
			return err
		}
		for _, p := range parts {
			if err := p.save(w); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("learner: Save: %w", err)
	}
	return nil
}

// loadSection reads a learner's section of the given kind: read reads and
// checks its payload and returns the function that commits it, which runs
// only once the whole section (its end marker and checksums) has been
// read and checked, so that on any error the learner is unchanged. Errors
// about the data wrap ErrCorrupt (or ErrMismatch, from read); a failure of
// r itself is returned wrapped as it is.
func loadSection(r io.Reader, kind string, read func(io.Reader) (func(), error)) error {
	var commit func()
	err := checkpoint.Load(r, kind, ckVersion, func(_ uint32, r io.Reader) error {
		var err error
		commit, err = read(r)
		return err
	})
	switch {
	case err == nil:
		commit()
		return nil
	case errors.Is(err, ErrCorrupt) || errors.Is(err, ErrMismatch):
		return err
	case errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, checkpoint.ErrFormat):
		return errorf(ErrCorrupt, "%w", err)
	}
	return fmt.Errorf("learner: reading the checkpoint: %w", err) // the reader's own failure
}

// readHeader reads a learner checkpoint's JSON header into h (unknown
// fields refused; at most ckMaxHeader bytes, memory growing only with the
// bytes that arrive). JSON has no NaN or infinity (and a number beyond
// float64's range fails to decode), so every float field of h is finite.
func readHeader(r io.Reader, h any) error {
	if err := checkpoint.ReadJSON(r, h, ckMaxHeader); err != nil {
		if errors.Is(err, checkpoint.ErrCorrupt) {
			return errorf(ErrCorrupt, "header: %w", err)
		}
		return err
	}
	return nil
}

// checkHead checks what every learner's checkpoint header holds against
// the learner: the saved configuration must be valid and, after defaults,
// equal the learner's (ErrCorrupt, ErrMismatch), and the sampling RNG's
// state must decode; it returns that RNG. O(1).
func checkHead[C interface{ Validate() (C, error) }](saved, cur C, rng []byte) (*rand.PCG, error) {
	s, err := saved.Validate()
	if err != nil {
		return nil, errorf(ErrCorrupt, "saved config: %w", err)
	}
	if diff := configDiff(s, cur); diff != "" {
		return nil, errorf(ErrMismatch, "config differs: %s", diff)
	}
	pcg := new(rand.PCG)
	if err := pcg.UnmarshalBinary(rng); err != nil {
		return nil, errorf(ErrCorrupt, "RNG state: %w", err)
	}
	return pcg, nil
}

// replayHead is what the checkpoint headers of the replay learners (DQN,
// TD3, SAC) hold alike and checkReplayHead checks.
type replayHead struct {
	method             string
	loss               model.Loss
	steps              uint64
	rng                []byte
	statSteps, version uint64
	timing             Timing
	sampled            *Moments
}

// checkReplayHead checks a replay learner's saved header against the
// learner (configuration cur, method m): checkHead's configuration and
// RNG, checkMethod's method and loss, checkCounters' counters. It returns
// the restored RNG. O(1).
func checkReplayHead[C interface{ Validate() (C, error) }](saved, cur C, m sampler.Method, h replayHead) (*rand.PCG, error) {
	pcg, err := checkHead(saved, cur, h.rng)
	if err != nil {
		return nil, err
	}
	if err := checkMethod(h.method, h.loss, m); err != nil {
		return nil, err
	}
	if err := checkCounters(h.steps, h.statSteps, h.version, h.timing, h.sampled); err != nil {
		return nil, err
	}
	return pcg, nil
}

// checkMethod refuses (ErrMismatch) a checkpoint trained with another
// replay method or loss than m. Losses compare by kind, threshold K and
// exponent, so Huber with Delta 0 and with Delta 1 are the same loss.
func checkMethod(name string, loss model.Loss, m sampler.Method) error {
	if err := loss.Validate(); err != nil {
		return errorf(ErrCorrupt, "saved loss: %w", err)
	}
	same := loss.Kind == m.Loss.Kind && loss.Alpha == m.Loss.Alpha &&
		(loss.K() == m.Loss.K() || loss.Kind == model.MSE || loss.Kind == model.L1)
	if name != m.Name || !same {
		return errorf(ErrMismatch, "method differs: saved %q with loss %+v, learner %q with loss %+v", name, loss, m.Name, m.Loss)
	}
	return nil
}

// loadNet reads one network and checks it has like's shape. A network
// with a NaN or infinite parameter is refused by model.LoadNet (the error
// wraps ErrCorrupt, model.ErrCorrupt and model.ErrNonFinite and names the
// parameter).
func loadNet(r io.Reader, what string, like *model.Net) (*model.Net, error) {
	n, err := model.LoadNet(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err)
	}
	if !n.SameShape(like) {
		return nil, errorf(ErrMismatch, "%s: saved shape %+v, the learner's %+v", what, n.Config(), like.Config())
	}
	return n, nil
}

// loadAdam reads one optimizer and checks it fits like (length, config)
// and has taken steps updates. Non-finite moments and negative second
// moments are refused by model.LoadAdam, naming the moment. An optimizer
// saved in the other precision than like's (AdamConfig.Float32: the
// learner's networks were built with the other model.Config.Float32) is
// converted to like's (model.Adam.SetFloat32: its step count and moments
// carry over, rounded to float32 or widened exactly).
func loadAdam(r io.Reader, what string, like *model.Adam, steps uint64) (*model.Adam, error) {
	adam, err := model.LoadAdam(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err)
	}
	if adam.Len() != like.Len() {
		return nil, errorf(ErrCorrupt, "%s holds %d parameters, the network %d", what, adam.Len(), like.Len())
	}
	// The step size is not compared: ReF-ER anneals it each step (the
	// learner's configured rates are compared with its config).
	ac, lc := adam.Config(), like.Config()
	if ac.Float32 != lc.Float32 { // the precision of the learner's networks changed: convert
		adam.SetFloat32(lc.Float32)
		ac.Float32 = lc.Float32
	}
	ac.LR, lc.LR = 0, 0
	if ac != lc {
		return nil, errorf(ErrCorrupt, "%s config %+v does not match the saved learner config (%+v)", what, adam.Config(), like.Config())
	}
	if adam.Steps() != steps {
		return nil, errorf(ErrCorrupt, "%s has taken %d steps, the learner %d", what, adam.Steps(), steps)
	}
	return adam, nil
}

// checkCounters refuses (ErrCorrupt, naming the field) saved counters no
// run could have produced: a counter of steps other than the step count, a
// published version beyond it, a negative time or a negative sum of
// non-negative values (moments may be nil). O(1).
func checkCounters(steps, statSteps, version uint64, tm Timing, m *Moments) error {
	switch {
	case statSteps != steps:
		return errorf(ErrCorrupt, "stats.steps = %d, the step count is %d", statSteps, steps)
	case version > steps:
		return errorf(ErrCorrupt, "stats.version = %d, beyond the step count %d", version, steps)
	case tm.Steps < 0 || tm.Sample < 0 || tm.WriteBack < 0:
		return errorf(ErrCorrupt, "stats.timing holds a negative duration (%+v)", tm)
	case m != nil && (m.SumTD < 0 || m.SumTD2 < 0 || m.SumQ2 < 0):
		return errorf(ErrCorrupt, "stats.sampled holds a negative sum of non-negative values (%+v)", *m)
	}
	return nil
}

// configDiff lists the top-level fields in which a and b (two values of
// the same struct type) differ, or "".
func configDiff(a, b any) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var s string
	for i := range va.NumField() {
		fa, fb := va.Field(i).Interface(), vb.Field(i).Interface()
		if !reflect.DeepEqual(fa, fb) {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%s saved %+v, learner %+v", va.Type().Field(i).Name, fa, fb)
		}
	}
	return s
}

func floatBits(f float64) uint64 { return math.Float64bits(f) }

// finite0 is f, or 0 when f is NaN or infinite (JSON has no encoding for
// those; a diagnostic counter is not worth failing a checkpoint over).
func finite0(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}
