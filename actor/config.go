package actor

import (
	"errors"
	"fmt"
	"math"

	"github.com/apexrl/apex/buffer"
)

// MaxCount bounds the counts an actor allocates from (Config.NStep,
// LocalBatch and StatsWindow, NewNStep's n): 2^20, far above any useful
// value, so a mistaken configuration is an error rather than an
// allocation that exhausts memory.
const MaxCount = 1 << 20

// Defaults used when a Config field is zero (Horgan et al. 2018, "Distributed
// Prioritized Experience Replay", arXiv 1803.00933, §4.1 and appendix).
const (
	// DefaultEpsilonBase and DefaultEpsilonAlpha give actor i of N the
	// exploration rate eps_i = 0.4^(1 + 7·i/(N−1)) (Ape-X §4.1).
	DefaultEpsilonBase  = 0.4
	DefaultEpsilonAlpha = 7.0
	// DefaultNStep is the n of the n-step returns (Ape-X DQN: 3).
	DefaultNStep = 3
	// DefaultGamma is the discount (Ape-X DQN: 0.99).
	DefaultGamma = 0.99
	// DefaultLocalBatch is the number of transitions an actor hands over at
	// once (Ape-X: a local buffer of 50, flushed with its priorities).
	DefaultLocalBatch = 50
	// DefaultRefreshEvery is the number of environment steps between two
	// parameter refreshes from the Store (Ape-X: every 400 frames).
	DefaultRefreshEvery = 400
	// DefaultStatsWindow is the number of recent episodes MeanReturn
	// averages over.
	DefaultStatsWindow = 100
)

// ErrConfig: a Config field is out of range, or the environment and the
// network do not fit together. Errors from Validate and New wrap it.
var ErrConfig = errors.New("actor: invalid config")

// ErrBusy: Fill or Update was called while another Fill or Update of the
// same actor was running (an actor is for one goroutine at a time). The
// refused call does nothing.
var ErrBusy = errors.New("actor: already in use")

// Config configures one Ape-X actor. The zero value of each field selects
// its documented default, so Config{ID: i, NumActors: n, Seed: s} is the
// paper's setting. Validate reports the first field out of range.
type Config struct {
	// ID is this actor's index, 0 <= ID < NumActors. It picks the actor's
	// exploration rate, seeds its generator together with Seed, is stored in
	// the ActorID column and makes its EpisodeIDs unique across actors.
	ID int
	// NumActors is the number of actors N sharing the epsilon schedule
	// (>= 1). 0 means 1.
	NumActors int

	// EpsilonBase and EpsilonAlpha set the per-actor exploration rate
	// eps_i = EpsilonBase^(1 + EpsilonAlpha·i/(N−1)) (see Epsilon). With
	// N = 1 the single actor gets EpsilonBase (0.4): the formula's first
	// actor. EpsilonBase in (0, 1], 0 means 0.4; EpsilonAlpha finite and
	// >= 0, 0 means 7 (use FixedEpsilon for other shapes).
	EpsilonBase  float64
	EpsilonAlpha float64
	// FixedEpsilon, when set, replaces the schedule by Epsilon for this
	// actor (evaluation, tests, a greedy actor with Epsilon 0).
	FixedEpsilon bool
	// Epsilon is the exploration rate used when FixedEpsilon is set, in
	// [0, 1].
	Epsilon float64
	// EpsilonDecaySteps, when > 0, anneals the exploration rate linearly
	// from 1 to the actor's rate (the schedule's or Epsilon) over its first
	// EpsilonDecaySteps environment steps, as DQN does (TER: 1.0 → 0.01).
	// 0 means the rate from the start. >= 0.
	EpsilonDecaySteps int64

	// NStep is the n of the n-step returns (1..MaxCount). 0 means 3.
	NStep int
	// Gamma is the per-step discount in (0, 1]. 0 means 0.99.
	Gamma float64
	// LocalBatch is the number of n-step transitions Fill hands over at
	// once, with their initial priorities (1..MaxCount). 0 means 50.
	LocalBatch int
	// RefreshEvery is the number of environment steps between two reads of
	// the Store (>= 1); a read copies the parameters only when their
	// version changed. 0 means 400.
	RefreshEvery int
	// StatsWindow is the number of recent episodes Stats().MeanReturn
	// averages over (1..MaxCount). 0 means 100.
	StatsWindow int

	// Columns selects the optional buffer columns Fill fills; it must match
	// the buffer's Config (ColumnsOf), because a buffer rejects a column it
	// does not store.
	Columns Columns

	// Seed seeds the actor's generator (exploration and episode seeds),
	// together with ID: the same (Seed, ID) and the same parameter
	// snapshots give the same transitions.
	Seed uint64
}

// Columns says which optional columns of buffer.Transitions an actor
// fills, besides the required Obs, NextObs, Action, Reward, Discount and
// the optional Flags and Priority that it always fills (Priority only once
// it has parameters and a Prioritizer; see Actor.Fill).
type Columns struct {
	// Episode: EpisodeID and EpisodeStep (the step t of s_t within its
	// episode, from 0).
	Episode bool
	// GlobalStep: the actor's own environment-step count when a_t was
	// taken (from 0; per actor, not summed over actors).
	GlobalStep bool
	// ActorID: Config.ID.
	ActorID bool
	// StateHash: codes of s_t and of the bootstrap state (StateHash,
	// NextStateHash): the environment's exact codes when it implements
	// envs.StateHasher, otherwise a Projection of the observation (TER's
	// d = 3 random projection, rounded; the same for every actor).
	StateHash bool
}

// ColumnsOf returns the optional columns a buffer with config c stores, so
// that an actor fills exactly those. It serves both action kinds: the
// action column follows the actor (Actor fills Action, for a buffer with
// buffer.Discrete actions; Continuous fills ActionVec, for a buffer with
// buffer.Continuous actions of the box's dimension), so it is not among
// the Columns.
func ColumnsOf(c buffer.Config) Columns {
	return Columns{Episode: c.Episode, GlobalStep: c.GlobalStep, ActorID: c.ActorID, StateHash: c.StateHash}
}

// Epsilon returns Ape-X's exploration rate of actor i among n,
// base^(1 + alpha·i/(n−1)) (Horgan et al. 2018, §4.1): actor 0 gets base,
// actor n−1 gets base^(1+alpha), and the exponents in between are evenly
// spaced. For n = 1 it returns base (the exponent's i/(n−1) is taken as 0).
// Unless 0 <= i < n it returns an error wrapping ErrConfig. O(1).
func Epsilon(base, alpha float64, i, n int) (float64, error) {
	if i < 0 || i >= n {
		return math.NaN(), fmt.Errorf("%w: Epsilon: actor %d of %d (want 0 <= i < n)", ErrConfig, i, n)
	}
	if n == 1 {
		return base, nil
	}
	return math.Pow(base, 1+alpha*float64(i)/float64(n-1)), nil
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.NumActors == 0 {
		c.NumActors = 1
	}
	if c.EpsilonBase == 0 {
		c.EpsilonBase = DefaultEpsilonBase
	}
	if c.EpsilonAlpha == 0 {
		c.EpsilonAlpha = DefaultEpsilonAlpha
	}
	if c.NStep == 0 {
		c.NStep = DefaultNStep
	}
	if c.Gamma == 0 {
		c.Gamma = DefaultGamma
	}
	if c.LocalBatch == 0 {
		c.LocalBatch = DefaultLocalBatch
	}
	if c.RefreshEvery == 0 {
		c.RefreshEvery = DefaultRefreshEvery
	}
	if c.StatsWindow == 0 {
		c.StatsWindow = DefaultStatsWindow
	}
	return c
}

// Validate fills in the defaults and reports the first field out of range
// (wrapping ErrConfig).
func (c Config) Validate() error {
	_, err := c.validated()
	return err
}

func (c Config) validated() (Config, error) {
	c = c.withDefaults()
	bad := func(format string, args ...any) (Config, error) {
		return c, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	switch {
	case c.NumActors < 1:
		return bad("NumActors must be >= 1, got %d", c.NumActors)
	case c.ID < 0 || c.ID >= c.NumActors:
		return bad("ID must be in [0, NumActors=%d), got %d", c.NumActors, c.ID)
	case !(c.EpsilonBase > 0 && c.EpsilonBase <= 1):
		return bad("EpsilonBase must be in (0, 1], got %v", c.EpsilonBase)
	case !(c.EpsilonAlpha >= 0) || math.IsInf(c.EpsilonAlpha, 1):
		return bad("EpsilonAlpha must be finite and >= 0, got %v", c.EpsilonAlpha)
	case c.FixedEpsilon && !(c.Epsilon >= 0 && c.Epsilon <= 1):
		return bad("Epsilon must be in [0, 1], got %v", c.Epsilon)
	case !c.FixedEpsilon && c.Epsilon != 0:
		return bad("Epsilon (%v) is only used with FixedEpsilon", c.Epsilon)
	case c.EpsilonDecaySteps < 0:
		return bad("EpsilonDecaySteps must be >= 0, got %d", c.EpsilonDecaySteps)
	case c.NStep < 1 || c.NStep > MaxCount:
		return bad("NStep must be in [1, %d], got %d", MaxCount, c.NStep)
	case !(c.Gamma > 0 && c.Gamma <= 1):
		return bad("Gamma must be in (0, 1], got %v", c.Gamma)
	case c.LocalBatch < 1 || c.LocalBatch > MaxCount:
		return bad("LocalBatch must be in [1, %d], got %d", MaxCount, c.LocalBatch)
	case c.RefreshEvery < 1:
		return bad("RefreshEvery must be >= 1, got %d", c.RefreshEvery)
	case c.StatsWindow < 1 || c.StatsWindow > MaxCount:
		return bad("StatsWindow must be in [1, %d], got %d", MaxCount, c.StatsWindow)
	}
	return c, nil
}

// epsilon is the exploration rate c gives (c validated).
func (c Config) epsilon() float64 {
	if c.FixedEpsilon {
		return c.Epsilon
	}
	e, _ := Epsilon(c.EpsilonBase, c.EpsilonAlpha, c.ID, c.NumActors) // validated: 0 <= ID < NumActors
	return e
}

// DefaultSigma is the standard deviation of a continuous actor's Gaussian
// exploration noise when ContinuousConfig.Sigma is 0, in units of the
// action box's half-range: TD3's N(0, 0.1·max_action) (Fujimoto et al.
// 2018, "Addressing Function Approximation Error in Actor-Critic Methods",
// arXiv 1802.09477, §6.1 and its reference code).
const DefaultSigma = 0.1

// ContinuousConfig configures one continuous-action actor (NewContinuous):
// the Ape-X actor for a deterministic policy (Ape-X DPG, Horgan et al.
// 2018, §4.2) exploring with TD3's Gaussian noise. The zero value of each
// field selects its documented default, so
// ContinuousConfig{ID: i, NumActors: n, Seed: s} gives every actor TD3's
// σ = 0.1. Validate reports the first field out of range.
type ContinuousConfig struct {
	// ID and NumActors are as in Config: 0 <= ID < NumActors (0 means 1).
	// ID picks the actor's σ_i when SigmaLast spreads them, seeds its
	// generator together with Seed, is stored in the ActorID column and
	// makes its EpisodeIDs unique across actors.
	ID        int
	NumActors int

	// Sigma is the standard deviation of the Gaussian noise added to the
	// scaled policy action, in units of the box's half-range
	// half_j = (high_j − low_j)/2:
	// a = clip(ScaleAction(π(s)) + N(0, (σ_i·half_j)²), low, high).
	// Finite and > 0; 0 means DefaultSigma (0.1).
	Sigma float64
	// SigmaLast, when set, spreads the actors' noise geometrically from
	// Sigma (actor 0) to SigmaLast (actor N−1),
	// σ_i = Sigma·(SigmaLast/Sigma)^(i/(N−1)) (see the Sigma function):
	// Ape-X's way of giving each actor its own exploration, as its
	// eps_i = 0.4^(1+7i/(N−1)) is geometric. Finite and > 0; 0 means every
	// actor gets Sigma, as in TD3 and Ape-X DPG.
	SigmaLast float64
	// OUTheta, when > 0, makes the noise temporally correlated: an
	// Ornstein–Uhlenbeck process per action dimension (DDPG's exploration,
	// Lillicrap et al. 2016), x ← x − OUTheta·x·dt + σ_i·√dt·N(0, 1) with
	// dt = 0.01 as in OpenAI baselines, reset to 0 when an episode starts,
	// added in units of the half-range like the Gaussian noise. Its
	// stationary std is σ_i/√(2·OUTheta) and it drifts over about
	// 1/(OUTheta·dt) steps: the push that tasks such as
	// MountainCarContinuous need to be explored. 0 (the default) means
	// independent Gaussian noise each step. Finite and >= 0.
	OUTheta float64
	// NoNoise makes the actor play the deterministic policy
	// ScaleAction(π(s)) once it has parameters (tests; a greedy actor).
	// Sigma and SigmaLast must then be 0.
	NoNoise bool
	// RandomSteps is the number of environment steps, counted from the
	// actor's first, during which it acts uniformly at random in the box
	// whatever parameters it holds: TD3's start_timesteps warm-up, per
	// actor (N actors put N·RandomSteps such steps in the buffer). >= 0;
	// 0 means none beyond the steps taken before the first snapshot
	// arrives, which are always uniform.
	RandomSteps int

	// NStep, Gamma, LocalBatch, RefreshEvery, StatsWindow, Columns and
	// Seed mean what they mean in Config, with the same defaults (n = 3,
	// gamma = 0.99, batches of 50, a Store read every 400 steps, a window
	// of 100 episodes). TD3 itself learns from 1-step targets: NStep 1
	// reproduces them.
	NStep        int
	Gamma        float64
	LocalBatch   int
	RefreshEvery int
	StatsWindow  int
	Columns      Columns
	Seed         uint64

	// Floats, when not empty, are the buffer's float columns
	// (buffer.Config.Floats), in order, and Behaviour must index the two
	// where the actor records its behaviour for ReF-ER (TD3 with ReF-ER):
	// the mean ScaleAction(π(s)) and the std σ_i·half_j of its Gaussian
	// noise (Behaviour.Boot is not used). It then stores the unclipped
	// sample a in ActionVec (the environment still gets a clipped to the
	// box), so that the learner's importance ratio uses the density that
	// drew a. A uniform warm-up step records mean = a. It needs NStep 1,
	// Gaussian noise (OUTheta 0, not NoNoise); any other float column is
	// filled with zeros.
	Floats []buffer.FloatColumn
	// Behaviour indexes, in Floats, the behaviour's mean and std columns
	// (action-width values each); set it exactly when Floats is set. For
	// ReF-ER, sampler.REFERColumnIndex of the buffer's Config gives them.
	Behaviour *Behaviour
}

// Sigma returns the exploration noise of actor i among n when the noise
// spreads geometrically from first (actor 0) to last (actor n−1):
// first·(last/first)^(i/(n−1)), first for n = 1, first for every actor
// when last equals first. Unless 0 <= i < n it returns an error wrapping
// ErrConfig. O(1).
func Sigma(first, last float64, i, n int) (float64, error) {
	if i < 0 || i >= n {
		return math.NaN(), fmt.Errorf("%w: Sigma: actor %d of %d (want 0 <= i < n)", ErrConfig, i, n)
	}
	switch {
	case i == 0 || first == last:
		return first, nil
	case i == n-1:
		return last, nil
	}
	return first * math.Pow(last/first, float64(i)/float64(n-1)), nil
}

// common returns the fields c shares with Config, as a Config.
func (c ContinuousConfig) common() Config {
	return Config{ID: c.ID, NumActors: c.NumActors, NStep: c.NStep, Gamma: c.Gamma, LocalBatch: c.LocalBatch,
		RefreshEvery: c.RefreshEvery, StatsWindow: c.StatsWindow, Columns: c.Columns, Seed: c.Seed}
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c ContinuousConfig) withDefaults() ContinuousConfig {
	b := c.common().withDefaults()
	c.NumActors, c.NStep, c.Gamma, c.LocalBatch, c.RefreshEvery, c.StatsWindow =
		b.NumActors, b.NStep, b.Gamma, b.LocalBatch, b.RefreshEvery, b.StatsWindow
	if !c.NoNoise {
		if c.Sigma == 0 {
			c.Sigma = DefaultSigma
		}
		if c.SigmaLast == 0 {
			c.SigmaLast = c.Sigma
		}
	}
	return c
}

// Validate fills in the defaults and reports the first field out of range
// (wrapping ErrConfig).
func (c ContinuousConfig) Validate() error {
	_, _, err := c.validated()
	return err
}

// validated returns c with its defaults and the common fields as a
// validated Config (the runner's).
func (c ContinuousConfig) validated() (ContinuousConfig, Config, error) {
	c = c.withDefaults()
	common, err := c.common().validated()
	if err != nil {
		return c, common, err
	}
	bad := func(format string, args ...any) (ContinuousConfig, Config, error) {
		return c, common, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	finitePos := func(x float64) bool { return x > 0 && !math.IsInf(x, 1) }
	switch {
	case c.NoNoise && (c.Sigma != 0 || c.SigmaLast != 0):
		return bad("Sigma (%v) and SigmaLast (%v) are not used with NoNoise", c.Sigma, c.SigmaLast)
	case !c.NoNoise && !finitePos(c.Sigma):
		return bad("Sigma must be finite and > 0, got %v", c.Sigma)
	case !c.NoNoise && !finitePos(c.SigmaLast):
		return bad("SigmaLast must be finite and > 0, got %v", c.SigmaLast)
	case c.RandomSteps < 0:
		return bad("RandomSteps must be >= 0, got %d", c.RandomSteps)
	case !(c.OUTheta >= 0) || math.IsInf(c.OUTheta, 1):
		return bad("OUTheta must be finite and >= 0, got %v", c.OUTheta)
	case c.NoNoise && c.OUTheta != 0:
		return bad("OUTheta (%v) is not used with NoNoise", c.OUTheta)
	case len(c.Floats) > 0 && c.Behaviour == nil:
		return bad("Floats is set without Behaviour: say which float columns hold the behaviour's mean and std (sampler.REFERColumnIndex gives them for ReF-ER)")
	case len(c.Floats) == 0 && c.Behaviour != nil:
		return bad("Behaviour is set without Floats, the buffer's float columns it indexes")
	case len(c.Floats) > 0 && (c.NStep != 1 || c.NoNoise || c.OUTheta != 0):
		return bad("Floats (the ReF-ER behaviour columns) need NStep 1 and Gaussian noise (got NStep %d, NoNoise %v, OUTheta %v)", c.NStep, c.NoNoise, c.OUTheta)
	}
	return c, common, nil
}

// sigma is the exploration noise c gives (c validated).
func (c ContinuousConfig) sigma() float64 {
	if c.NoNoise {
		return 0
	}
	s, _ := Sigma(c.Sigma, c.SigmaLast, c.ID, c.NumActors) // validated: 0 <= ID < NumActors
	return s
}
