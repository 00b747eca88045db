package buffer

import (
	"fmt"
	"math"
)

// Flag bits stored per item.
const (
	// FlagTerminal marks a transition that ended its episode by termination
	// (no bootstrap from the next state).
	FlagTerminal uint32 = 1 << iota
	// FlagTruncated marks a transition whose episode was cut by a time limit
	// (the next state is still bootstrapped from).
	FlagTruncated
)

// Transitions is a batch of transitions in columnar form: column c holds
// Len() items of width w each, item i at c[i*w:(i+1)*w]. Actors fill one and
// hand it to Buffer.Insert; Buffer.NewBatch allocates one for sampling.
//
// Len is len(Reward). The columns Obs, NextObs, Reward, Discount and the
// action column of the config's kind are required. Every other column the
// Config enables may be nil (stored as zeros) or have exactly the right
// length; a column the Config does not enable must be nil.
type Transitions struct {
	Obs       []float32 // Len*ObsDim
	NextObs   []float32 // Len*ObsDim: the state to bootstrap from
	Action    []int32   // Len, discrete actions
	ActionVec []float32 // Len*ActionDim, continuous actions
	Reward    []float32 // Len (an n-step adder stores the discounted n-step return)
	Discount  []float32 // Len: the factor for the bootstrap value (0 at a termination)
	Flags     []uint32  // Len, FlagTerminal | FlagTruncated; nil means 0

	EpisodeID     []uint64 // Len, if Config.Episode
	EpisodeStep   []int32  // Len, if Config.Episode
	GlobalStep    []int64  // Len, if Config.GlobalStep
	ActorID       []int32  // Len, if Config.ActorID
	StateHash     []uint64 // Len, if Config.StateHash
	NextStateHash []uint64 // Len, if Config.StateHash
	Floats        [][]float32

	// Priority gives each new item its priority (Insert only). nil gives
	// every item the maximum priority seen so far.
	Priority []float64
}

// Len is the number of transitions: len(t.Reward).
// A nil t has no transitions.
func (t *Transitions) Len() int {
	if t == nil {
		return 0
	}
	return len(t.Reward)
}

// Reset empties t, keeping every column's storage for the next batch (an
// actor or inserter that refills one Transitions allocates nothing). O(1).
// A nil t is left alone.
func (t *Transitions) Reset() {
	if t == nil {
		return
	}
	t.Obs, t.NextObs, t.Action, t.ActionVec = t.Obs[:0], t.NextObs[:0], t.Action[:0], t.ActionVec[:0]
	t.Reward, t.Discount, t.Flags = t.Reward[:0], t.Discount[:0], t.Flags[:0]
	t.EpisodeID, t.EpisodeStep, t.GlobalStep, t.ActorID = t.EpisodeID[:0], t.EpisodeStep[:0], t.GlobalStep[:0], t.ActorID[:0]
	t.StateHash, t.NextStateHash, t.Priority = t.StateHash[:0], t.NextStateHash[:0], t.Priority[:0]
	for i := range t.Floats {
		t.Floats[i] = t.Floats[i][:0]
	}
}

// check validates t against cfg for Insert.
func (t *Transitions) check(cfg *Config) error {
	n := t.Len()
	col := func(name string, got, width int, enabled, required bool) error {
		switch {
		case !enabled && got != 0:
			return fmt.Errorf("%w: column %s is not enabled in the Config but has %d values", ErrShape, name, got)
		case !enabled:
			return nil
		case got == 0 && !required && n > 0:
			return nil
		case got != n*width:
			return fmt.Errorf("%w: column %s has %d values, want %d (%d items × %d)", ErrShape, name, got, n*width, n, width)
		}
		return nil
	}
	disc := cfg.Action == Discrete
	for _, err := range []error{
		col("Obs", len(t.Obs), cfg.ObsDim, true, true),
		col("NextObs", len(t.NextObs), cfg.ObsDim, true, true),
		col("Action", len(t.Action), 1, disc, true),
		col("ActionVec", len(t.ActionVec), cfg.ActionDim, !disc, true),
		col("Discount", len(t.Discount), 1, true, true),
		col("Flags", len(t.Flags), 1, true, false),
		col("EpisodeID", len(t.EpisodeID), 1, cfg.Episode, false),
		col("EpisodeStep", len(t.EpisodeStep), 1, cfg.Episode, false),
		col("GlobalStep", len(t.GlobalStep), 1, cfg.GlobalStep, false),
		col("ActorID", len(t.ActorID), 1, cfg.ActorID, false),
		col("StateHash", len(t.StateHash), 1, cfg.StateHash, false),
		col("NextStateHash", len(t.NextStateHash), 1, cfg.StateHash, false),
		col("Priority", len(t.Priority), 1, true, false),
	} {
		if err != nil {
			return err
		}
	}
	if len(t.Floats) != 0 && len(t.Floats) != len(cfg.Floats) {
		return fmt.Errorf("%w: %d float columns given, the Config has %d", ErrShape, len(t.Floats), len(cfg.Floats))
	}
	for i, f := range t.Floats {
		if err := col("Floats["+cfg.Floats[i].Name+"]", len(f), cfg.Floats[i].Width, true, false); err != nil {
			return err
		}
	}
	if disc && cfg.NumActions > 0 {
		for i, a := range t.Action {
			if a < 0 || int(a) >= cfg.NumActions {
				return fmt.Errorf("%w: Action[%d] = %d is outside [0, %d)", ErrShape, i, a, cfg.NumActions)
			}
		}
	}
	for i, p := range t.Priority {
		if !validPriority(p) {
			return fmt.Errorf("%w: Priority[%d] = %v (priorities must be finite and >= 0)", ErrPriority, i, p)
		}
	}
	for _, c := range [...]struct {
		name  string
		v     []float32
		width int
	}{{"Obs", t.Obs, cfg.ObsDim}, {"NextObs", t.NextObs, cfg.ObsDim}, {"ActionVec", t.ActionVec, cfg.ActionDim},
		{"Reward", t.Reward, 1}, {"Discount", t.Discount, 1}} {
		if i := firstNonFinite(c.v); i >= 0 {
			return fmt.Errorf("%w: %s[%d] (item %d) is %v", ErrNonFinite, c.name, i, i/max(c.width, 1), c.v[i])
		}
	}
	for k, f := range t.Floats {
		if i := firstNonFinite(f); i >= 0 {
			return fmt.Errorf("%w: Floats[%s][%d] (item %d) is %v", ErrNonFinite, cfg.Floats[k].Name, i, i/cfg.Floats[k].Width, f[i])
		}
	}
	return nil
}

// firstNonFinite returns the index of v's first NaN or infinity, or -1.
// Cost: one pass that only detects (anyNonFinite: an AVX2 loop where the
// CPU has it) and, only when it finds one, a second pass to locate it.
func firstNonFinite(v []float32) int {
	if !anyNonFinite(v) {
		return -1
	}
	for i, x := range v {
		if math.Float32bits(x)&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1
}

// anyNonFiniteGo is anyNonFinite's portable twin: a branch-free pass, 8
// values a step. An all-ones exponent marks NaN and ±Inf: adding one
// exponent unit to the masked exponent carries into the sign bit exactly
// then, so OR-ing the sums flags any of them.
func anyNonFiniteGo(v []float32) bool {
	const exp, unit = 0x7f800000, 0x00800000
	var acc uint32
	i := 0
	for ; i+8 <= len(v); i += 8 {
		w := v[i : i+8 : i+8]
		acc |= (math.Float32bits(w[0])&exp + unit) | (math.Float32bits(w[1])&exp + unit) |
			(math.Float32bits(w[2])&exp + unit) | (math.Float32bits(w[3])&exp + unit) |
			(math.Float32bits(w[4])&exp + unit) | (math.Float32bits(w[5])&exp + unit) |
			(math.Float32bits(w[6])&exp + unit) | (math.Float32bits(w[7])&exp + unit)
	}
	for ; i < len(v); i++ {
		acc |= math.Float32bits(v[i])&exp + unit
	}
	return acc&0x80000000 != 0
}

// Ref names one stored item: its slot and the generation of the occupant.
// A Ref stays valid until the slot is overwritten; operations on a Ref whose
// generation no longer matches are dropped and counted.
type Ref struct {
	Slot uint32
	// Gen is the slot's generation tag: 24 bits that change on every
	// overwrite, always even for a stored item (wrapping after 2^23-1
	// overwrites of the same slot).
	Gen uint32
}

// Batch receives sampled items. Create it with Buffer.NewBatch(n); every
// sampling call fills all n rows.
type Batch struct {
	Transitions
	// Refs[i] names the item in row i.
	Refs []Ref
	// Prob[i] is the probability with which row i was drawn, as actually
	// used: for proportional sampling the item's priority read during the
	// descent divided by Total; for uniform sampling 1/Size.
	Prob []float64
	// Size is the number of stored items when the batch was drawn.
	Size int
	// Total is the total priority mass when the batch was drawn.
	Total float64
	// MinProb is the smallest non-zero priority in the buffer divided by
	// Total, when the buffer tracks it (0 otherwise); normalising importance
	// weights by the buffer maximum needs it.
	MinProb float64
	// Weight receives importance weights (see Batch.ImportanceWeights).
	Weight []float64

	scr scratch // per-batch work space of the sampling calls
}

// scratch is reused across sampling calls so they do not allocate.
type scratch struct {
	roots []uint64 // stripe root snapshot
	u     []uint64 // residual target per row
	s     []int32  // stripe per row
	node  []int32  // node index per row (leaf index at the end)
	vsel  []uint64 // the value of the node the row descends into, as read a level up
	slot  []int32  // global slot per row
	word  []uint64 // leaf word chosen per row
	ok    []bool
	at    []float64          // SampleAt's positions during its call (nil otherwise)
	rows  []int32            // rows selectRows moves at one level
	base  []int              // per row, the first node of its group at the level being descended
	pre   [fanout]uint64     // prefix sums of the group being scanned
	pre17 [fanout + 1]uint64 // 0, then the prefix sums (scanRowsAVX2)
}

func (sc *scratch) size(rows, stripes int) {
	if cap(sc.u) < rows {
		sc.u = make([]uint64, rows)
		sc.s = make([]int32, rows)
		sc.node = make([]int32, rows)
		sc.vsel = make([]uint64, rows)
		sc.slot = make([]int32, rows)
		sc.word = make([]uint64, rows)
		sc.ok = make([]bool, rows)
		sc.rows = make([]int32, rows)
		sc.base = make([]int, rows)
	}
	sc.u, sc.s, sc.node, sc.vsel, sc.slot, sc.word, sc.ok = sc.u[:rows], sc.s[:rows], sc.node[:rows], sc.vsel[:rows], sc.slot[:rows], sc.word[:rows], sc.ok[:rows]
	sc.rows, sc.base = sc.rows[:rows], sc.base[:rows]
	if cap(sc.roots) < stripes {
		sc.roots = make([]uint64, stripes)
	}
	sc.roots = sc.roots[:stripes]
}

// Len is the number of rows (0 for a nil b).
func (b *Batch) Len() int {
	if b == nil {
		return 0
	}
	return len(b.Refs)
}
