package sampler

import "github.com/apexrl/apex/buffer"

// EpisodeSource is the capability of a stage that keeps whole episodes
// for a learner that keeps per-step state over them: the ReF-ER methods'
// REFER stage, whose learner-side controller (learner.REFERController)
// keeps each step's importance ratio, value, KL and Retrace target. A
// method declares it in Method.Episodes (nil for the other methods); the
// learner never recovers it from the Selector.
//
// The stage owns the episodes (which steps form one, when it is
// sampleable, when it is evicted); the observer owns what it keeps per
// step, indexed by the buffer slot the stage reports. Every method is
// called by the goroutine that samples (the learner's), and the
// observer's events run on it, inside the stage's calls.
type EpisodeSource interface {
	// Buffer is a buffer of the layout the stage samples: the buffer
	// itself in process; behind a network (remote.Client.Method) a local
	// buffer of the table's layout, which the learner makes its batches
	// from.
	Buffer() *buffer.Buffer
	// Slots is the number of slots of the buffer the stage samples (its
	// Capacity): every slot the stage reports is below it.
	Slots() int
	// Config is the method's ReF-ER configuration, defaults filled in:
	// the controller's parameters (variant, C, D, A, beta's rate, ...)
	// and the stage's MaxSteps.
	Config() REFERConfig
	// Observe makes o the one observer of the stage's episodes (a later
	// call replaces it; nil removes it) and reports to it at once every
	// episode already stored (EpisodeFinished, oldest first).
	// O(stored steps).
	Observe(o EpisodeObserver)
}

// EpisodeObserver receives an EpisodeSource's events, in the order they
// happen, on the sampling goroutine. The slices it is handed are the
// stage's: valid during the call only (Sampled's until the next Sample),
// never to be modified.
type EpisodeObserver interface {
	// EpisodeFinished reports that episode e became sampleable: all its
	// steps are stored. Evictions its arrival causes come after.
	EpisodeFinished(e Episode)
	// EpisodeDropped reports that the episode of handle h left the stage:
	// evicted (oldest first, beyond MaxSteps) or overwritten by the
	// buffer. The handle may name a later episode after this.
	EpisodeDropped(h int32)
	// Indexed reports that a Sample has indexed the steps written since
	// the previous one (their EpisodeFinished and EpisodeDropped came
	// before) and is about to draw rows.
	Indexed()
	// Sampled reports the slots of the rows the last Sample drew, in row
	// order (fewer than requested, often none, when it failed). A row's
	// episode may have been dropped while later rows were drawn (the
	// buffer overwrote it): its EpisodeDropped came before Sampled.
	Sampled(rows []uint32)
}

// Episode is a finished episode as an EpisodeSource reports it. Step t of
// the episode (t = 0 .. len(Slots)−1) is stored in buffer slot Slots[t],
// with reward Reward[t] (r_{t+1}, as stored) and discount Discount[t] (γ,
// 0 at a termination).
type Episode struct {
	// Handle names the episode until its EpisodeDropped; handles are
	// small non-negative integers, reused after a drop.
	Handle int32
	// ID is the episode's EpisodeID.
	ID               uint64
	Slots            []uint32
	Reward, Discount []float64
	// Truncated: the episode was cut by a time limit (its last step has
	// FlagTruncated, not FlagTerminal), and VBoot is V(s_T) as the actor
	// stored it (REFERBootColumn); otherwise VBoot is 0.
	Truncated bool
	VBoot     float64
}
