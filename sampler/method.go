package sampler

import (
	"fmt"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
)

// errMethod heads the errors of a method's configuration and pairing (a
// stage with a loss it was not derived for, an unknown name, ...): they are
// about the replay method, so they say "sampler", while errors.Is still
// matches buffer.ErrConfig for callers that test for a configuration error.
var errMethod error = methodError{}

type methodError struct{}

func (methodError) Error() string        { return "sampler: invalid replay method" }
func (methodError) Is(target error) bool { return target == buffer.ErrConfig }

// Methods lists the replay methods NewMethod builds, by name.
var Methods = []string{"uniform", "per", "rank", "lap", "pal", "ter", "refer", "refer-1", "refer-2", "er", "ners"}

// Method is a replay method as the learner uses it: a selection stage
// paired with the loss its expected gradient was derived for (Fujimoto et
// al. 2020: a prioritized sampler and a loss are two views of one expected
// gradient, so neither is a method alone). A learner samples with
// Selector, weights each row by Weighter's weight times Normalizer's batch
// scale, regresses with Loss, and writes |δ| back through Selector.Update.
//
// Build one with NewMethod, which only pairs what belongs together; a
// Method assembled by hand is checked by Validate.
type Method struct {
	// Name is the method's name (one of Methods for NewMethod's).
	Name string
	// Selector chooses the replayed items and turns feedback into stored
	// priority. Required.
	Selector Selector
	// Weighter gives per-item loss weights before the forward pass (PER's
	// importance weights); nil means every weight is 1.
	Weighter Weighter
	// Normalizer scales the batch's loss by a factor of its TD errors
	// (PAL's 1/λ̂); nil means 1.
	Normalizer Normalizer
	// Loss is the per-sample loss ρ(δ). Under the ReF-ER methods
	// ("refer", "refer-1", "refer-2", "er") it is the critics' loss of a
	// learner that has critics (TD3), and zero for V-RACER, whose loss is
	// its own (an off-policy policy gradient, a value regression toward
	// Retrace targets and a KL penalty, weighted per row by its ReF-ER
	// controller's RowWeights).
	Loss model.Loss
	// Episodes is set by the methods whose stage keeps whole episodes for
	// a learner-side controller (the ReF-ER methods: the REFER stage,
	// whose controller is learner.REFERController); nil for the others.
	Episodes EpisodeSource
	// Warnings are pairings NewMethod allowed but that are known to be
	// biased (a prioritized stage with MSE and no importance weights,
	// Theorem 3); the caller should show them to the user.
	Warnings []string
}

// Validate reports a Method that cannot be used: no Selector, or an
// invalid Loss (errors match buffer.ErrConfig, or wrap model.ErrConfig).
func (m Method) Validate() error {
	if m.Selector == nil {
		return fmt.Errorf("%w: method %q has no Selector", errMethod, m.Name)
	}
	if err := m.Loss.Validate(); err != nil {
		return fmt.Errorf("method %q: %w", m.Name, err)
	}
	return nil
}

// String names the method, its stage and its loss.
func (m Method) String() string {
	sel := "<nil>"
	if m.Selector != nil {
		sel = m.Selector.String()
	}
	if _, ok := m.Selector.(*REFER); ok && m.Loss == (model.Loss{}) {
		return fmt.Sprintf("%s: %s + the learner's own loss", m.Name, sel)
	}
	return fmt.Sprintf("%s: %s + %s", m.Name, sel, lossString(m.Loss))
}

func lossString(l model.Loss) string {
	switch l.Kind {
	case model.Huber:
		return fmt.Sprintf("huber(k=%g)", l.K())
	case model.PAL:
		return fmt.Sprintf("pal(k=%g,alpha=%g)/batch-mean", l.K(), l.Alpha)
	}
	return l.Kind.String()
}

// MethodConfig holds the parameters of NewMethod. Zero values select the
// defaults noted on each field.
type MethodConfig struct {
	// Loss is the per-sample loss of "uniform", "per", "rank", "ter",
	// "ners" and, for a learner with critics, the ReF-ER methods: Huber,
	// MSE or L1 (the zero value is Huber(1), DQN's; zero for V-RACER). "lap" and "pal" fix
	// their own loss from LAP (Huber(K), PAL(K, Alpha)); a Loss given for
	// them must be that one or zero.
	Loss model.Loss
	// PER configures "per"; nil means DefaultPERConfig(BetaSteps).
	PER *PERConfig
	// Rank configures "rank"; nil means DefaultRankConfig(BetaSteps).
	Rank *RankConfig
	// LAP configures "lap" and "pal" (the same Alpha and K, so the two
	// are each other's twin); nil means DefaultLAPConfig().
	LAP *LAPConfig
	// TER configures "ter"; nil means DefaultTERConfig(BetaSteps). The
	// buffer must store state hashes (buffer.Config.StateHash).
	TER *TERConfig
	// REFER configures "refer", "refer-1", "refer-2" and "er"; nil means
	// DefaultREFERConfig(BetaSteps) (BetaSteps then serves as T_total for
	// the annealing rate A = 5/T_total). The method's name sets Variant.
	// The buffer must store continuous actions, the episode columns and
	// REFERColumns.
	REFER *REFERConfig
	// NERS configures "ners"; nil means DefaultNERSConfig(BetaSteps).
	NERS *NERSConfig
	// BetaSteps is the learner steps over which the default PER and rank
	// configurations anneal beta to 1 (and the default ReF-ER
	// configuration anneals c_max and the learning rate).
	BetaSteps int64
	// NoIS drops the importance weights of "per", "rank", "ners" and "ter" (the
	// PER rows of ter; Weighter nil).
	// With an MSE loss that pairing is biased (Theorem 3: it behaves like a
	// uniform loss on |δ|^(2+alpha)); NewMethod allows it with a warning.
	NoIS bool
}

// NewMethod builds the method called name over buf from cfg, pairing each
// stage with its loss:
//
//	uniform  Uniform, cfg.Loss (Huber(1) by default), weights 1
//	per      PER, cfg.Loss, importance weights (unless NoIS)
//	rank     Rank, cfg.Loss, importance weights (unless NoIS)
//	lap      LAP, Huber(K), no importance weights
//	pal      PAL (uniform selection), PAL(K, Alpha) loss scaled by 1/λ̂
//	ter      TER, cfg.Loss, importance weights on its PER rows (unless NoIS)
//	refer    REFER (full ReF-ER), V-RACER's own loss or a critic's cfg.Loss, no Weighter
//	refer-1  REFER with Rule 1 only (skip far-policy samples)
//	refer-2  REFER with Rule 2 only (KL penalty, rho clipped at 1e3)
//	er       REFER with neither: plain replay of whole episodes' steps
//	ners     NERS (a learned scorer sets the priorities), cfg.Loss, importance weights (unless NoIS)
//
// A configuration block of another method (PER set for "rank", say) is
// refused rather than ignored. The PAL loss is refused with any other stage (it is only the uniform twin
// of LAP with its normaliser), and a loss other than their own is refused
// for lap and pal. The ReF-ER methods take the critics' loss of a learner
// that has critics (V-RACER refuses any) and no NoIS (they have no importance
// weights); their per-row weights (learner.REFERController.RowWeights)
// come from the learner's fresh importance ratios, after its forward pass,
// so they are not a Weighter: the learner's controller, built from the
// method's Episodes, gives them. Errors read
// "sampler: invalid replay method: ..." and match buffer.ErrConfig (or
// wrap model.ErrConfig for an invalid loss) and say what was wrong; an unknown name lists the valid ones.
func NewMethod(name string, buf *buffer.Buffer, cfg MethodConfig) (Method, error) {
	if buf == nil {
		return Method{}, fmt.Errorf("%w: method %q: nil buffer", errMethod, name)
	}
	if err := cfg.Loss.Validate(); err != nil {
		return Method{}, fmt.Errorf("method %q: %w", name, err)
	}
	lap := DefaultLAPConfig()
	if cfg.LAP != nil {
		lap = *cfg.LAP
	}
	m := Method{Name: name, Loss: cfg.Loss}
	switch name {
	case "refer", "refer-1", "refer-2", "er":
		if cfg.Loss.Kind == model.PAL {
			return Method{}, fmt.Errorf("%w: method %q: the PAL loss is paired with uniform selection and its batch normaliser only: use method \"pal\"", errMethod, name)
		}
		if cfg.NoIS {
			return Method{}, fmt.Errorf("%w: method %q: NoIS is for per, rank, ter and ners (ReF-ER has no importance weights)", errMethod, name)
		}
	case "uniform", "per", "rank", "ter", "ners":
		if cfg.Loss.Kind == model.PAL {
			return Method{}, fmt.Errorf("%w: method %q: the PAL loss is paired with uniform selection and its batch normaliser only: use method \"pal\"", errMethod, name)
		}
		if name == "uniform" && cfg.NoIS {
			return Method{}, fmt.Errorf("%w: method \"uniform\": NoIS is for per, rank, ter and ners (uniform replay has no importance weights)", errMethod)
		}
	case "lap", "pal":
		if cfg.NoIS {
			return Method{}, fmt.Errorf("%w: method %q: NoIS is for per, rank, ter and ners (%s has no importance weights)", errMethod, name, name)
		}
		want := model.Loss{Kind: model.Huber, Delta: lap.K}
		if name == "pal" {
			want = model.Loss{Kind: model.PAL, Delta: lap.K, Alpha: lap.Alpha}
		}
		if cfg.Loss != (model.Loss{}) && (cfg.Loss.Kind != want.Kind || cfg.Loss.K() != want.K() || cfg.Loss.Alpha != want.Alpha) {
			return Method{}, fmt.Errorf("%w: method %q pairs with the %s loss (from its K and Alpha), got %s", errMethod, name, lossString(want), lossString(cfg.Loss))
		}
		m.Loss = want
	default:
		return Method{}, fmt.Errorf("%w: unknown method %q (valid: %v)", errMethod, name, Methods)
	}
	refer := name == "refer" || name == "refer-1" || name == "refer-2" || name == "er"
	for _, b := range []struct {
		set      bool
		field    string
		ok       bool
		forWhich string
	}{
		{cfg.PER != nil, "PER", name == "per", "per"},
		{cfg.Rank != nil, "Rank", name == "rank", "rank"},
		{cfg.LAP != nil, "LAP", name == "lap" || name == "pal", "lap and pal"},
		{cfg.TER != nil, "TER", name == "ter", "ter"},
		{cfg.REFER != nil, "REFER", refer, "refer, refer-1, refer-2 and er"},
		{cfg.NERS != nil, "NERS", name == "ners", "ners"},
	} {
		if b.set && !b.ok {
			return Method{}, fmt.Errorf("%w: method %q: MethodConfig.%s is set, but it configures %s only", errMethod, name, b.field, b.forWhich)
		}
	}
	switch name {
	case "uniform":
		u := NewUniform(buf)
		m.Selector, m.Weighter = u, u
	case "per":
		c := DefaultPERConfig(cfg.BetaSteps)
		if cfg.PER != nil {
			c = *cfg.PER
		}
		p, err := NewPER(buf, c)
		if err != nil {
			return Method{}, err
		}
		m.Selector, m.Weighter = p, p
	case "rank":
		c := DefaultRankConfig(cfg.BetaSteps)
		if cfg.Rank != nil {
			c = *cfg.Rank
		}
		r, err := NewRank(buf, c)
		if err != nil {
			return Method{}, err
		}
		m.Selector, m.Weighter = r, r
	case "ter":
		c := DefaultTERConfig(cfg.BetaSteps)
		if cfg.TER != nil {
			c = *cfg.TER
		}
		t, err := NewTER(buf, c)
		if err != nil {
			return Method{}, err
		}
		m.Selector, m.Weighter = t, t
	case "refer", "refer-1", "refer-2", "er":
		c := DefaultREFERConfig(cfg.BetaSteps)
		if cfg.REFER != nil {
			c = *cfg.REFER
		}
		c.Variant, _ = referVariant(name)
		r, err := NewREFER(buf, c)
		if err != nil {
			return Method{}, err
		}
		m.Selector, m.Episodes = r, r
	case "ners":
		c := DefaultNERSConfig(cfg.BetaSteps)
		if cfg.NERS != nil {
			c = *cfg.NERS
		}
		n, err := NewNERS(buf, c)
		if err != nil {
			return Method{}, err
		}
		m.Selector, m.Weighter = n, n
	case "lap":
		l, err := NewLAP(buf, lap)
		if err != nil {
			return Method{}, err
		}
		m.Selector = l
	case "pal":
		p, err := NewPAL(buf, lap)
		if err != nil {
			return Method{}, err
		}
		m.Selector, m.Weighter, m.Normalizer = p, p, p
	}
	if (name == "per" || name == "rank" || name == "ter" || name == "ners") && cfg.NoIS {
		m.Weighter = nil
		if m.Loss.Kind == model.MSE {
			m.Warnings = append(m.Warnings, fmt.Sprintf("method %q with an MSE loss and no importance weights is biased toward outliers "+
				"(Fujimoto et al. 2020, Theorem 3: it minimises a uniform loss on |δ|^(2+alpha)); consider \"lap\"", name))
		}
	}
	return m, nil
}
