package sampler

import (
	"fmt"
	"maps"
	"slices"

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

// Method is a replay method as the learner uses it: a selection stage
// paired with the loss its expected gradient was derived for (Fujimoto et
// al. 2020: a prioritized sampler and a loss are two views of one expected
// gradient, so neither is a method alone). A learner samples with
// Selector, weights each row by Weighter's weight times Normalizer's batch
// scale, regresses with Loss, and writes |δ| back through Selector.Update.
//
// Build one with NewMethod, which only pairs what belongs together; a
// Method assembled by hand is checked by Validate. Each method is
// described by a registered Spec (registry.go, and one method_*.go file
// per method).
type Method struct {
	// Name is the method's name (its Spec's, for NewMethod's).
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
	// whose controller is learner.REFERController; behind a network,
	// remote.Client.Method's episode feed); nil for the others.
	Episodes EpisodeSource
	// Warnings are pairings NewMethod allowed but that are known to be
	// biased (a prioritized stage with MSE and no importance weights,
	// Theorem 3); the caller should show them to the user.
	Warnings []string

	// The capabilities below are declared by the method's Build; each is
	// nil when the method lacks it. Callers use them, never a type
	// assertion on Selector.

	// Features, if not nil, takes the learner's feedback instead of
	// Selector.Update: a stage that scores items from Q and the target as
	// well as δ (NERS). Same goroutine as Sample.
	Features FeatureUpdater
	// Evaluated, if not nil, takes the mean return of each periodic
	// greedy evaluation (NERS's replay reward); a non-finite return is an
	// error. Safe for concurrent use with the learner's calls.
	Evaluated func(meanReturn float64) error
	// State, if not nil, is the method's state beyond the buffer and the
	// learner (NERS's scorer), which a checkpoint saves and a resumed run
	// loads into the method rebuilt from the same configuration. Not
	// concurrently with the learner's calls.
	State Stateful
	// Positional, if not nil, draws at positions the caller gives, as
	// fractions of the stage's mass (proportional PER, LAP, uniform, PAL):
	// what exact sampling across replay shards needs (remote.ShardedMethod).
	// Same goroutine as Sample, except Mass (any).
	Positional Positional
	// Stats, if not nil, snapshots the method's own counters, one value
	// per Stat of its Spec, keyed by Stat.Name (a new map each call).
	// Safe for concurrent use.
	Stats func() map[string]float64
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
	if m.Episodes != nil && m.Loss == (model.Loss{}) { // a ReF-ER method under V-RACER
		return fmt.Sprintf("%s: %s + the learner's own loss", m.Name, sel)
	}
	return fmt.Sprintf("%s: %s + %s", m.Name, sel, LossName(m.Loss))
}

// LossName is l as a method's pairing names it: "huber(k=1)", "mse",
// "l1", "pal(k=1,alpha=0.4)/batch-mean". O(1).
func LossName(l model.Loss) string {
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
	// Loss is the per-sample loss of a method that takes the learner's
	// (Spec.OwnLoss nil: uniform, per, rank, ter, ners and, for a learner
	// with critics, the ReF-ER methods): Huber, MSE or L1 (the zero value
	// is Huber(1), DQN's; zero for V-RACER). A method with its own loss
	// (lap: Huber(K), pal: PAL(K, Alpha)) takes a Loss only if it is that
	// one (or zero).
	Loss model.Loss
	// Options are the method's numeric options by name (Spec.Options:
	// "ter-eta", "lap-k", ...); an absent or zero option selects its
	// default. An option the method does not have is an error, and so is
	// an option given together with the typed block it would configure.
	Options map[string]float64

	// The typed blocks configure the built-in methods directly, instead
	// of Options (each method's Spec.Blocks says which it reads; a block
	// set for another method is an error).

	// PER configures per; nil means DefaultPERConfig(BetaSteps).
	PER *PERConfig
	// Rank configures rank; nil means DefaultRankConfig(BetaSteps).
	Rank *RankConfig
	// LAP configures lap and pal (the same Alpha and K, so the two are
	// each other's twin); nil means DefaultLAPConfig().
	LAP *LAPConfig
	// TER configures ter; nil means DefaultTERConfig(BetaSteps). The
	// buffer must store state hashes (buffer.Config.StateHash).
	TER *TERConfig
	// REFER configures the ReF-ER methods; nil means
	// DefaultREFERConfig(BetaSteps) (BetaSteps then serves as T_total for
	// the annealing rate A = 5/T_total). The method's name sets Variant.
	// The buffer must store continuous actions, the episode columns and
	// REFERColumns.
	REFER *REFERConfig
	// NERS configures ners; nil means DefaultNERSConfig(BetaSteps) with
	// Horizon, ActionScale and Seed below.
	NERS *NERSConfig

	// BetaSteps is the learner steps over which the default PER and rank
	// configurations anneal beta to 1 (and the default ReF-ER
	// configuration anneals c_max and the learning rate).
	BetaSteps int64
	// NoIS drops the importance weights of a method that has them
	// (Spec.ImportanceWeights: per, rank, ter's PER rows, ners; Weighter
	// nil). With an MSE loss that pairing is biased (Theorem 3: it
	// behaves like a uniform loss on |δ|^(2+alpha)); NewMethod allows it
	// with a warning.
	NoIS bool

	// What the run around the method is, for the methods that adapt to it.

	// Learner is the learner the method serves ("dqn", "td3", "sac",
	// "vracer"; empty: unknown). ReF-ER under td3 keeps the critics' own
	// targets and the paper's annealing rate for DDPG.
	Learner string
	// Horizon is the environment's episode time limit (0: none).
	Horizon int
	// ActionScale is the bound of a symmetric continuous action box (0:
	// discrete actions, or unknown).
	ActionScale float64
	// Seed seeds a method's own randomness (NERS's scorer).
	Seed uint64
}

// Option is the value of the option called name (0: unset, the default).
func (c MethodConfig) Option(name string) float64 { return c.Options[name] }

// blockSet reports whether the typed block called name is set.
func (c MethodConfig) blockSet(name string) bool {
	switch name {
	case "PER":
		return c.PER != nil
	case "Rank":
		return c.Rank != nil
	case "LAP":
		return c.LAP != nil
	case "TER":
		return c.TER != nil
	case "REFER":
		return c.REFER != nil
	case "NERS":
		return c.NERS != nil
	}
	return false
}

// NewMethod builds the method called name over buf from cfg, as its
// registered Spec describes (Methods lists them; Spec.Doc says what each
// is), pairing each stage with its loss:
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
// An option or a configuration block of another method (PER set for
// rank, say) is refused rather than ignored. The PAL loss is refused with
// a method that takes the learner's loss (it is only the uniform twin of
// LAP with its normaliser), and a loss other than their own is refused for
// lap and pal. NoIS is refused for a method without importance weights.
// The ReF-ER methods take the critics' loss of a learner that has critics
// (V-RACER refuses any); their per-row weights
// (learner.REFERController.RowWeights) come from the learner's fresh
// importance ratios, after its forward pass, so they are not a Weighter:
// the learner's controller, built from the method's Episodes, gives them.
// Errors read "sampler: invalid replay method: ..." and match
// buffer.ErrConfig (or wrap model.ErrConfig for an invalid loss) and say
// what was wrong; an unknown name lists the valid ones.
func NewMethod(name string, buf *buffer.Buffer, cfg MethodConfig) (Method, error) {
	spec, ok := Lookup(name)
	if !ok {
		return Method{}, unknownMethod(name)
	}
	if buf == nil {
		return Method{}, fmt.Errorf("%w: method %q: nil buffer", errMethod, name)
	}
	if err := cfg.Loss.Validate(); err != nil {
		return Method{}, fmt.Errorf("method %q: %w", name, err)
	}
	if err := spec.checkConfig(cfg); err != nil {
		return Method{}, err
	}
	loss := cfg.Loss
	if spec.OwnLoss != nil {
		want, err := spec.OwnLoss(cfg)
		if err != nil {
			return Method{}, err
		}
		if cfg.Loss != (model.Loss{}) && (cfg.Loss.Kind != want.Kind || cfg.Loss.K() != want.K() || cfg.Loss.Alpha != want.Alpha) {
			return Method{}, fmt.Errorf("%w: method %q pairs with the %s loss (from its options), got %s", errMethod, name, LossName(want), LossName(cfg.Loss))
		}
		loss = want
	} else if cfg.Loss.Kind == model.PAL {
		return Method{}, fmt.Errorf("%w: method %q: the PAL loss is paired with uniform selection and its batch normaliser only: use method %s",
			errMethod, name, Phrase(ownLossMethods(model.PAL), "or"))
	}
	m, err := spec.Build(buf, cfg)
	if err != nil {
		return Method{}, err
	}
	m.Name, m.Loss = name, loss
	if cfg.NoIS {
		m.Weighter = nil
		if m.Loss.Kind == model.MSE {
			m.Warnings = append(m.Warnings, fmt.Sprintf("method %q with an MSE loss and no importance weights is biased toward outliers "+
				"(Fujimoto et al. 2020, Theorem 3: it minimises a uniform loss on |δ|^(2+alpha)); consider %s", name, Phrase(ownLossMethods(model.Huber), "or")))
		}
	}
	if err := m.Validate(); err != nil {
		return Method{}, err
	}
	return m, nil
}

// checkConfig refuses what cfg sets that the method does not take: an
// option of another method (or an invalid value), a block of another
// method, an option together with the block it would override, NoIS
// without importance weights.
func (s Spec) checkConfig(cfg MethodConfig) error {
	for _, name := range slices.Sorted(maps.Keys(cfg.Options)) { // the first bad option, by name
		v := cfg.Options[name]
		o, ok := s.option(name)
		if !ok {
			if others := OptionMethods(name); len(others) > 0 {
				return fmt.Errorf("%w: method %q: option %s configures %s only", errMethod, s.Name, name, Phrase(others, "and"))
			}
			return fmt.Errorf("%w: method %q has no option %q (its options: %s)", errMethod, s.Name, name, s.optionNames())
		}
		if err := o.Check(v); err != nil {
			return fmt.Errorf("method %q: %w", s.Name, err)
		}
	}
	for _, b := range blockNames {
		if !cfg.blockSet(b) {
			continue
		}
		if !slices.Contains(s.Blocks, b) {
			var takers []string
			for _, o := range Specs() {
				if slices.Contains(o.Blocks, b) {
					takers = append(takers, o.Name)
				}
			}
			return fmt.Errorf("%w: method %q: MethodConfig.%s is set, but it configures %s only", errMethod, s.Name, b, Phrase(takers, "and"))
		}
		for _, name := range slices.Sorted(maps.Keys(cfg.Options)) {
			if cfg.Options[name] != 0 {
				return fmt.Errorf("%w: method %q: option %s and MethodConfig.%s are both set (the block holds every setting)", errMethod, s.Name, name, b)
			}
		}
	}
	if cfg.NoIS && !s.ImportanceWeights {
		var with []string
		for _, o := range Specs() {
			if o.ImportanceWeights {
				with = append(with, o.Name)
			}
		}
		return fmt.Errorf("%w: method %q: NoIS is for %s (%s has no importance weights)", errMethod, s.Name, Phrase(with, "and"), s.Name)
	}
	return nil
}

// option returns the method's option called name.
func (s Spec) option(name string) (Option, bool) {
	i := slices.IndexFunc(s.Options, func(o Option) bool { return o.Name == name })
	if i < 0 {
		return Option{}, false
	}
	return s.Options[i], true
}

// optionNames lists the method's options ("none" without).
func (s Spec) optionNames() string {
	names := make([]string, len(s.Options))
	for i, o := range s.Options {
		names[i] = o.Name
	}
	return Phrase(names, "and")
}

// ownLossMethods are the methods whose own loss (with default options)
// is of kind k.
func ownLossMethods(k model.LossKind) []string {
	var out []string
	for _, s := range Specs() {
		if s.OwnLoss == nil {
			continue
		}
		if l, err := s.OwnLoss(MethodConfig{}); err == nil && l.Kind == k {
			out = append(out, s.Name)
		}
	}
	return out
}

// setOption sets *p to the option called name of cfg when it is set: an
// option overriding a stage's default.
func setOption[T int | float64](p *T, cfg MethodConfig, name string) {
	if v := cfg.Options[name]; v != 0 {
		*p = T(v)
	}
}
