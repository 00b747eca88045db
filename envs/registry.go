package envs

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// registry maps each registered name to its constructor.
var registry = map[string]func(opts ...Option) (Env, error){
	"CartPole-v1":              func(o ...Option) (Env, error) { return asEnv(NewCartPole(o...)) },
	"Acrobot-v1":               func(o ...Option) (Env, error) { return asEnv(NewAcrobot(o...)) },
	"MountainCar-v0":           func(o ...Option) (Env, error) { return asEnv(NewMountainCar(o...)) },
	"MountainCarContinuous-v0": func(o ...Option) (Env, error) { return asEnv(NewMountainCarContinuous(o...)) },
	"Pendulum-v1":              func(o ...Option) (Env, error) { return asEnv(NewPendulum(o...)) },
	"SparsePendulum-v1":        func(o ...Option) (Env, error) { return asEnv(NewSparsePendulum(o...)) },
	"NChain":                   func(o ...Option) (Env, error) { return asEnv(NewNChain(o...)) },
	"BlindCliffwalk":           func(o ...Option) (Env, error) { return asEnv(NewBlindCliffwalk(o...)) },
	"KeyDoor":                  func(o ...Option) (Env, error) { return asEnv(NewKeyDoor(o...)) },
	"KeyDoor-Random": func(o ...Option) (Env, error) {
		return asEnv(NewKeyDoor(append([]Option{WithRandomLayout()}, o...)...))
	},
	"KeyDoor-Tabular": func(o ...Option) (Env, error) {
		return asEnv(NewKeyDoor(append([]Option{WithTabular()}, o...)...))
	},
	"LQR-v0": func(o ...Option) (Env, error) { return asEnv(NewLQR(o...)) },
}

// asEnv converts a constructor's result, so that a failed construction
// gives a nil Env rather than an Env holding a nil pointer.
func asEnv[T Env](e T, err error) (Env, error) {
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Make returns a new instance of the environment registered under name,
// configured by opts. An unknown name is an error wrapping ErrUnknownEnv
// that lists the registered names; an option that is out of range or does
// not apply to the environment is an error wrapping ErrBadOption. Each call
// returns an independent instance (one per actor goroutine). O(size of the
// observation).
//
// Registered names (Names lists them):
//
//	CartPole-v1               Gymnasium's classic control tasks
//	Acrobot-v1
//	MountainCar-v0
//	MountainCarContinuous-v0
//	Pendulum-v1
//	SparsePendulum-v1         Pendulum-v1 with NERS's sparse reward (1 after 20 steps upright)
//	NChain                    TER's chain (WithSize: N, default 20)
//	BlindCliffwalk            PER's Blind Cliffwalk (WithSize: n, default 10)
//	KeyDoor                   the key-door grid, fixed layout (WithSize: side, default 6)
//	KeyDoor-Random            the key-door grid, a random layout at every Reset
//	KeyDoor-Tabular           the key-door grid, fixed layout, one-hot code of the whole state
//	LQR-v0                    a 1-D linear-quadratic regulator (WithLQR: LQRParams)
func Make(name string, opts ...Option) (Env, error) {
	mk, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (registered: %s)", ErrUnknownEnv, name, strings.Join(Names(), ", "))
	}
	return mk(opts...)
}

// Names returns the registered names, sorted. O(number of names).
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Option configures an environment in Make or in a New* constructor. Each
// environment documents the options it accepts; any other is an error.
type Option func(*options)

// Option kinds, as bits of options.set.
const (
	optMaxSteps = 1 << iota
	optSize
	optRandomLayout
	optGoalReward
	optLQR
	optTabular
)

var optionNames = []string{"WithMaxSteps", "WithSize", "WithRandomLayout", "WithGoalReward", "WithLQR", "WithTabular"}

// options is what the Option functions fill in.
type options struct {
	set          int // bits: which options were given
	maxSteps     int
	size         int
	randomLayout bool
	goalReward   float64
	lqr          LQRParams
	tabular      bool
}

// WithMaxSteps replaces the environment's time limit (MaxEpisodeSteps) by
// n >= 1 steps. Every environment accepts it.
func WithMaxSteps(n int) Option {
	return func(o *options) { o.set |= optMaxSteps; o.maxSteps = n }
}

// WithSize sets the size of a discrete environment: NChain's chain length
// N, BlindCliffwalk's number of states n, KeyDoor's grid side (outer walls
// included).
func WithSize(n int) Option {
	return func(o *options) { o.set |= optSize; o.size = n }
}

// WithRandomLayout makes KeyDoor draw a new layout (wall column, door, key,
// agent position and direction) at every Reset, as Minigrid's DoorKey does.
func WithRandomLayout() Option {
	return func(o *options) { o.set |= optRandomLayout; o.randomLayout = true }
}

// WithGoalReward sets KeyDoor's reward for reaching the goal (default: the
// time limit, TER's +MAXSTEPS). It must be finite.
func WithGoalReward(r float64) Option {
	return func(o *options) { o.set |= optGoalReward; o.goalReward = r }
}

// WithLQR sets LQR-v0's parameters (start from DefaultLQRParams and change
// fields). NewLQR validates them (LQRParams.Validate).
func WithLQR(p LQRParams) Option {
	return func(o *options) { o.set |= optLQR; o.lqr = p }
}

// WithTabular makes KeyDoor's observation a one-hot code of its whole
// state (tabular features: a linear Q-function on it is a table). Fixed
// layout only.
func WithTabular() Option {
	return func(o *options) { o.set |= optTabular; o.tabular = true }
}

// parseOptions applies opts and rejects options that env does not accept
// (the bits of accepted) and a time limit below 1.
func parseOptions(env string, accepted int, opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: %s: nil Option", ErrBadOption, env)
		}
		opt(&o)
	}
	if bad := o.set &^ (accepted | optMaxSteps); bad != 0 {
		var names, ok []string
		for i, n := range optionNames {
			if bad&(1<<i) != 0 {
				names = append(names, n)
			}
			if (accepted|optMaxSteps)&(1<<i) != 0 {
				ok = append(ok, n)
			}
		}
		return o, fmt.Errorf("%w: %s does not accept %s (it accepts %s)", ErrBadOption, env, strings.Join(names, ", "), strings.Join(ok, ", "))
	}
	if o.set&optMaxSteps != 0 && o.maxSteps < 1 {
		return o, fmt.Errorf("%w: %s: WithMaxSteps(%d): the time limit must be at least 1 step", ErrBadOption, env, o.maxSteps)
	}
	if o.set&optGoalReward != 0 && (math.IsNaN(o.goalReward) || math.IsInf(o.goalReward, 0)) {
		return o, fmt.Errorf("%w: %s: WithGoalReward(%v): the reward must be finite", ErrBadOption, env, o.goalReward)
	}
	return o, nil
}

// limit returns the WithMaxSteps value if given, else def.
func (o options) limit(def int) int {
	if o.set&optMaxSteps != 0 {
		return o.maxSteps
	}
	return def
}
