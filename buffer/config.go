package buffer

import (
	"fmt"
	"math/bits"
)

// ActionKind says how actions are stored.
type ActionKind uint8

const (
	// Discrete actions are stored as one int32 per item.
	Discrete ActionKind = iota
	// Continuous actions are stored as ActionDim float32 values per item.
	Continuous
)

func (k ActionKind) String() string {
	switch k {
	case Discrete:
		return "discrete"
	case Continuous:
		return "continuous"
	}
	return fmt.Sprintf("ActionKind(%d)", uint8(k))
}

// FloatColumn is an optional per-slot float32 column of Width values per
// item, such as a behaviour policy's mean and standard deviation (ReF-ER).
type FloatColumn struct {
	Name  string
	Width int
}

// Defaults used by Config.withDefaults.
const (
	// DefaultStripes is the number of stripes when Config.Stripes is 0 (or
	// the largest power of two not above Capacity, if that is smaller). It is
	// a constant, not a function of GOMAXPROCS, so the same seed samples the
	// same items on every machine.
	DefaultStripes = 16
	// DefaultMaxPriority is the largest priority a slot can hold when
	// Config.MaxPriority is 0. Larger priorities are clamped and counted in
	// Stats.PrioritiesClamped.
	DefaultMaxPriority = 1e4
	// DefaultInitialPriority is the "maximum priority seen so far" before any
	// priority has been written (PER Algorithm 1 sets p_1 = 1).
	DefaultInitialPriority = 1.0
	// MaxCapacity is the largest Capacity accepted (2^30 slots).
	MaxCapacity = 1 << 30
	// MaxWidth is the largest ObsDim, ActionDim or float-column width
	// accepted (2^20 values per item).
	MaxWidth = 1 << 20
	// minMaxPriority and maxMaxPriority bound Config.MaxPriority so the
	// fixed-point scale (see quantize.go) stays a normal float64.
	minMaxPriority = 1e-30
	maxMaxPriority = 1e30
)

// Config describes a Buffer. The zero value of each optional field selects
// the documented default; New validates the whole struct and reports the
// first field that is out of range.
type Config struct {
	// Capacity is the number of transitions held; the oldest item of a stripe
	// is overwritten when that stripe is full (FIFO per stripe). Required,
	// 1..MaxCapacity.
	Capacity int
	// Stripes is the number of independent regions, each with its own ring
	// cursor and sum tree, so concurrent inserters touch different cache
	// lines. A power of two, at most Capacity. 0 selects DefaultStripes.
	Stripes int
	// ObsDim is the length of one observation (float32 values). Required, > 0.
	ObsDim int
	// Action selects discrete (int32) or continuous (float32 vector) actions.
	Action ActionKind
	// ActionDim is the length of a continuous action; it must be 0 or 1 for
	// discrete actions.
	ActionDim int
	// NumActions, if > 0, makes Insert reject discrete actions outside
	// [0, NumActions).
	NumActions int

	// Episode stores EpisodeID (uint64) and EpisodeStep (int32) per item.
	Episode bool
	// GlobalStep stores the actor's global environment step (int64) per item.
	GlobalStep bool
	// ActorID stores the id of the actor that produced the item (int32).
	ActorID bool
	// StateHash stores an exact uint64 hash of the state and of the next
	// state per item (Topological Experience Replay builds its graph on it).
	StateHash bool
	// Floats are extra per-slot float32 columns.
	Floats []FloatColumn

	// MaxPriority is the largest priority a slot can hold. Priorities are
	// stored as fixed-point integers whose resolution is chosen from
	// MaxPriority and Capacity so the tree's root can never overflow; see
	// Buffer.Resolution. Larger priorities are clamped to it and counted.
	// 0 selects DefaultMaxPriority.
	MaxPriority float64
	// InitialPriority is the priority given to new items (when the caller
	// gives none) until a larger one has been written. 0 selects
	// DefaultInitialPriority.
	InitialPriority float64
	// NoMinTree turns off the min-priority tree. Without it MinPriority is
	// unavailable, so importance weights can only be normalised by the batch
	// maximum; updates are a little cheaper.
	NoMinTree bool
}

// withDefaults returns c with zero optional fields replaced by defaults.
func (c Config) withDefaults() Config {
	if c.Stripes == 0 && c.Capacity > 0 {
		c.Stripes = DefaultStripes
		if c.Capacity < DefaultStripes {
			c.Stripes = 1 << (bits.Len(uint(c.Capacity)) - 1)
		}
	}
	if c.MaxPriority == 0 {
		c.MaxPriority = DefaultMaxPriority
	}
	if c.InitialPriority == 0 {
		c.InitialPriority = DefaultInitialPriority
	}
	return c
}

// Validate fills defaults and reports the first invalid field.
func (c Config) Validate() error {
	_, err := c.validated()
	return err
}

func (c Config) validated() (Config, error) {
	c = c.withDefaults()
	switch {
	case c.Capacity <= 0:
		return c, fmt.Errorf("%w: Capacity must be positive, got %d", ErrConfig, c.Capacity)
	case c.Capacity > MaxCapacity:
		return c, fmt.Errorf("%w: Capacity %d exceeds the maximum %d", ErrConfig, c.Capacity, MaxCapacity)
	case c.Stripes < 0 || c.Stripes&(c.Stripes-1) != 0:
		return c, fmt.Errorf("%w: Stripes must be a power of two, got %d", ErrConfig, c.Stripes)
	case c.Stripes > c.Capacity:
		return c, fmt.Errorf("%w: Stripes (%d) must not exceed Capacity (%d)", ErrConfig, c.Stripes, c.Capacity)
	case c.ObsDim <= 0 || c.ObsDim > MaxWidth:
		return c, fmt.Errorf("%w: ObsDim must be in [1, %d], got %d", ErrConfig, MaxWidth, c.ObsDim)
	case c.ActionDim > MaxWidth:
		return c, fmt.Errorf("%w: ActionDim must be at most %d, got %d", ErrConfig, MaxWidth, c.ActionDim)
	case c.Action != Discrete && c.Action != Continuous:
		return c, fmt.Errorf("%w: unknown Action kind %d", ErrConfig, c.Action)
	case c.Action == Continuous && c.ActionDim <= 0:
		return c, fmt.Errorf("%w: continuous actions need ActionDim > 0, got %d", ErrConfig, c.ActionDim)
	case c.Action == Discrete && (c.ActionDim < 0 || c.ActionDim > 1):
		return c, fmt.Errorf("%w: discrete actions take ActionDim 0 or 1, got %d", ErrConfig, c.ActionDim)
	case c.NumActions < 0:
		return c, fmt.Errorf("%w: NumActions must not be negative, got %d", ErrConfig, c.NumActions)
	case !(c.MaxPriority >= minMaxPriority && c.MaxPriority <= maxMaxPriority):
		return c, fmt.Errorf("%w: MaxPriority must be in [%g, %g], got %v", ErrConfig, minMaxPriority, maxMaxPriority, c.MaxPriority)
	case !(c.InitialPriority > 0) || c.InitialPriority > c.MaxPriority:
		return c, fmt.Errorf("%w: InitialPriority must be in (0, MaxPriority=%v], got %v", ErrConfig, c.MaxPriority, c.InitialPriority)
	}
	if c.Action == Discrete {
		c.ActionDim = 1
	}
	seen := map[string]bool{}
	for i, f := range c.Floats {
		if f.Name == "" {
			return c, fmt.Errorf("%w: Floats[%d] has no name", ErrConfig, i)
		}
		if seen[f.Name] {
			return c, fmt.Errorf("%w: Floats[%d]: duplicate column name %q", ErrConfig, i, f.Name)
		}
		seen[f.Name] = true
		if f.Width <= 0 || f.Width > MaxWidth {
			return c, fmt.Errorf("%w: Floats[%d] (%q): Width must be in [1, %d], got %d", ErrConfig, i, f.Name, MaxWidth, f.Width)
		}
	}
	if _, err := newQuantizer(c.Capacity, c.MaxPriority); err != nil {
		return c, err
	}
	if err := checkMemory(&c); err != nil {
		return c, err
	}
	return c, nil
}
