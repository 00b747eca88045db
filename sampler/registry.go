package sampler

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
)

// Spec describes one replay method in one place: its name, its options
// (with their defaults, validation and the command-line flags derived
// from them), what it needs from the buffer's layout and from the rest of
// the run, which losses and learners it pairs with, and how it is built.
// The runtime and the command line know methods only through their Specs:
// they loop over Methods and Lookup, so adding a method is one new file
// with a Spec plus its registration (Register, or the built-in list in
// registry.go).
//
// A Spec is read-only once registered.
type Spec struct {
	// Name is the method's name (TrainConfig.Sampler, -sampler): lower
	// case letters, digits and '-', unique among the registered methods.
	Name string
	// Doc is one line saying what the method is (the paper, the stage and
	// its loss), for listings and usage texts.
	Doc string
	// Options are the method's numeric options (MethodConfig.Options,
	// TrainConfig.MethodOptions, one command-line flag each). An option
	// several methods share (lap-alpha of lap and pal) is the same Option
	// value in each Spec; Register refuses two different Options under one
	// name.
	Options []Option
	// Blocks are the typed configuration blocks of MethodConfig the
	// method reads ("PER", "LAP", ...): an embedder's alternative to
	// Options. Setting a block for a method that does not read it is an
	// error.
	Blocks []string
	// Learners are the learners the method pairs with (the runtime's
	// names: "dqn", "td3", "sac", "vracer"), in order of preference: the
	// first one that takes the run's action space is the default.
	// Required.
	Learners []string
	// OwnLoss, if not nil, is the loss the method derives from its own
	// options (LAP's Huber(k), PAL's loss): a loss given in
	// MethodConfig.Loss must be that one (or zero). Nil means the method
	// takes the learner's loss, MethodConfig.Loss; the PAL loss is then
	// refused (it belongs to the method that derives it, with its batch
	// normaliser).
	OwnLoss func(cfg MethodConfig) (model.Loss, error)
	// ImportanceWeights says the method's Weighter corrects a
	// non-uniform sampling distribution (PER's importance weights):
	// MethodConfig.NoIS may drop them. NoIS is refused for other methods.
	ImportanceWeights bool
	// Needs is what the method needs from the rest of the run.
	Needs Needs
	// Stats describe the numbers Method.Stats reports, in order.
	Stats []Stat
	// Layout, if not nil, adds what the method needs to the replay
	// buffer's layout c (state hashes, float columns, an initial-priority
	// floor); c already holds the environment's spaces and the capacity.
	// cfg is the configuration Build will get.
	Layout func(cfg MethodConfig, c *buffer.Config)
	// Build builds the method's stages over buf: Selector (required) and
	// whichever of Weighter, Normalizer and the capabilities of Method it
	// has. NewMethod has already checked the options, blocks, loss and
	// NoIS, and sets Name, Loss and Warnings itself. Required.
	Build func(buf *buffer.Buffer, cfg MethodConfig) (Method, error)
}

// Needs is what a method needs from the run beyond its buffer layout.
type Needs struct {
	// FinishedEpisodes: the method samples the steps of finished episodes
	// only, so learning may start once every actor can have finished one.
	FinishedEpisodes bool
	// Behaviour: the method's importance ratios need each stored step's
	// behaviour density (Layout adds its columns): the actors record it,
	// take no uniformly random warm-up steps, and the learner keeps
	// ReF-ER's far-policy statistics (far fraction, KL, beta).
	Behaviour bool
	// ExplorationSigma, if not 0, is the default Gaussian exploration
	// noise of td3's actors under this method (in units of the action
	// half-range; ReF-ER's DDPG arm uses 0.2).
	ExplorationSigma float64
}

// Option is one numeric option of a method. Its value is a float64 in
// MethodConfig.Options (integers for Int options); zero or absent selects
// the default the Usage names.
type Option struct {
	// Name is the option's key and its command-line flag (without the
	// dash): lower case letters, digits and '-', e.g. "ter-eta".
	Name string
	// Usage is the flag's help text, with its default: "ter: share of
	// each batch drawn by PER, floor(eta*B) rows (0: 0.5)".
	Usage string
	// Int marks a count: the value must be a whole number.
	Int bool
}

// Check reports a value the option can never take: not finite, negative,
// or (Int) not a whole number. Finer bounds are the stage's (its
// constructor's errors). O(1).
func (o Option) Check(v float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("%w: -%s must be a finite number, got %v", errMethod, o.Name, v)
	case v < 0:
		return fmt.Errorf("%w: -%s must not be negative, got %v", errMethod, o.Name, v)
	case o.Int && (v != math.Trunc(v) || v > 1<<53):
		return fmt.Errorf("%w: -%s must be a whole number, got %v", errMethod, o.Name, v)
	}
	return nil
}

// Stat describes one number of a method's own state (Method.Stats).
type Stat struct {
	// Name is snake_case and starts with the method's family
	// ("ners_updates_total"): the key in Method.Stats' map and, after
	// "apex_", the Prometheus metric's name (counters end in _total).
	Name string
	// Help is the metric's help text.
	Help string
	// Counter marks a count that only grows; otherwise it is a gauge.
	Counter bool
}

// The registry of methods. Built-in methods are registered by init, in
// the order of builtins; Register adds more.
var registry struct {
	mu    sync.RWMutex
	specs []*Spec
}

var (
	nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	statRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// blockNames are MethodConfig's typed blocks, for Spec.Blocks.
var blockNames = []string{"PER", "Rank", "LAP", "TER", "REFER", "NERS"}

// Register adds a replay method. It refuses (an error matching
// buffer.ErrConfig) a Spec without a valid Name, Build or Learners, a
// name already registered, an option whose name is taken by a different
// Option, an unknown block and a malformed stat. Safe for concurrent use;
// O(methods·options).
func Register(s Spec) error {
	if err := s.check(); err != nil {
		return err
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	for _, o := range registry.specs {
		if o.Name == s.Name {
			return fmt.Errorf("%w: Register: method %q is already registered", errMethod, s.Name)
		}
		for _, a := range o.Options {
			for _, b := range s.Options {
				if a.Name == b.Name && a != b {
					return fmt.Errorf("%w: Register: method %q: option %q is already method %q's, with another definition", errMethod, s.Name, b.Name, o.Name)
				}
			}
		}
	}
	s.Options, s.Blocks, s.Learners, s.Stats = slices.Clone(s.Options), slices.Clone(s.Blocks), slices.Clone(s.Learners), slices.Clone(s.Stats)
	registry.specs = append(registry.specs, &s)
	return nil
}

// check reports what makes s unregistrable.
func (s *Spec) check() error {
	switch {
	case !nameRE.MatchString(s.Name):
		return fmt.Errorf("%w: Register: method name %q: want lower case letters, digits and '-'", errMethod, s.Name)
	case s.Build == nil:
		return fmt.Errorf("%w: Register: method %q has no Build", errMethod, s.Name)
	case len(s.Learners) == 0:
		return fmt.Errorf("%w: Register: method %q pairs with no learner (Learners)", errMethod, s.Name)
	}
	for i, o := range s.Options {
		if !nameRE.MatchString(o.Name) || o.Usage == "" {
			return fmt.Errorf("%w: Register: method %q: option %q needs a flag-like name and a Usage", errMethod, s.Name, o.Name)
		}
		for _, p := range s.Options[:i] {
			if p.Name == o.Name {
				return fmt.Errorf("%w: Register: method %q lists option %q twice", errMethod, s.Name, o.Name)
			}
		}
	}
	for _, b := range s.Blocks {
		if !slices.Contains(blockNames, b) {
			return fmt.Errorf("%w: Register: method %q: unknown block %q (MethodConfig's: %s)", errMethod, s.Name, b, strings.Join(blockNames, ", "))
		}
	}
	for _, st := range s.Stats {
		if !statRE.MatchString(st.Name) || st.Help == "" {
			return fmt.Errorf("%w: Register: method %q: stat %q needs a snake_case name and a Help", errMethod, s.Name, st.Name)
		}
	}
	return nil
}

// mustRegister registers a built-in method.
func mustRegister(s Spec) {
	if err := Register(s); err != nil {
		panic(err)
	}
}

// Methods returns the registered methods' names in registration order
// (the built-in ones first: uniform, per, rank, lap, pal, ter, the ReF-ER
// methods, ners). The slice is the caller's. O(methods).
func Methods() []string {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	names := make([]string, len(registry.specs))
	for i, s := range registry.specs {
		names[i] = s.Name
	}
	return names
}

// Lookup returns the Spec of the method called name, and whether there is
// one. The Spec is a copy; its slices must not be modified. O(methods).
func Lookup(name string) (Spec, bool) {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	for _, s := range registry.specs {
		if s.Name == name {
			return *s, true
		}
	}
	return Spec{}, false
}

// Specs returns every registered Spec in registration order. O(methods).
func Specs() []Spec {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	out := make([]Spec, len(registry.specs))
	for i, s := range registry.specs {
		out[i] = *s
	}
	return out
}

// Options returns every registered method's options, each once, in the
// order of registration: the flags a command line offers. O(methods·options).
func Options() []Option {
	var out []Option
	for _, s := range Specs() {
		for _, o := range s.Options {
			if !slices.ContainsFunc(out, func(p Option) bool { return p.Name == o.Name }) {
				out = append(out, o)
			}
		}
	}
	return out
}

// OptionMethods returns the names of the methods that take the option
// called name (none: no such option). O(methods·options).
func OptionMethods(name string) []string {
	var out []string
	for _, s := range Specs() {
		if s.TakesOption(name) {
			out = append(out, s.Name)
		}
	}
	return out
}

// TakesOption reports whether the method has the option called name.
func (s Spec) TakesOption(name string) bool {
	return slices.ContainsFunc(s.Options, func(o Option) bool { return o.Name == name })
}

// PairsWith reports whether the method pairs with the learner called algo.
func (s Spec) PairsWith(algo string) bool { return slices.Contains(s.Learners, algo) }

// unknownMethod is the error for a name no method is registered under.
func unknownMethod(name string) error {
	return fmt.Errorf("%w: unknown method %q (valid: %s)", errMethod, name, strings.Join(Methods(), ", "))
}

// Phrase lists names as English: "a", "a and b", "a, b and c" (conj
// "and" or "or").
func Phrase(names []string, conj string) string {
	switch len(names) {
	case 0:
		return "none"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}

// builtins are the methods this package registers, in the order Methods
// lists them. Adding a method: its file with its Spec, and one line here
// (or a Register call from another package).
var builtins = []func() Spec{uniformSpec, perSpec, rankSpec, lapSpec, palSpec, terSpec,
	referSpec(REFERFull), referSpec(REFERSkipOnly), referSpec(REFERPenaltyOnly), referSpec(REFERNone), nersSpec}

func init() {
	for _, s := range builtins {
		mustRegister(s())
	}
}
