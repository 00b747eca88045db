package envs

import (
	"fmt"
	"strings"
)

// KeyDoor sizes and limits.
const (
	// KeyDoorDefaultSize is the default grid side, outer walls included
	// (Minigrid's DoorKey-6x6).
	KeyDoorDefaultSize = 6
	// KeyDoorMinSize and KeyDoorMaxSize bound WithSize: 5 is the smallest
	// grid with room for the agent, the key, the wall and the goal; 32
	// keeps every coordinate in the 5 bits StateHash gives it.
	KeyDoorMinSize = 5
	KeyDoorMaxSize = 32
)

// KeyDoor actions: Minigrid's ids for the first three and, without drop,
// pickup and toggle after them.
const (
	KeyDoorLeft    = 0 // turn left (counter-clockwise)
	KeyDoorRight   = 1 // turn right (clockwise)
	KeyDoorForward = 2 // move one cell ahead, if the cell can be entered
	KeyDoorPickup  = 3 // pick up the key in the cell ahead
	KeyDoorToggle  = 4 // unlock (with the key) / open / close the door ahead
)

// Door states.
const (
	doorLocked = iota
	doorClosed
	doorOpen
)

// keyDoorDirs are the unit moves of the four directions: east, south,
// west, north (y grows downwards), Minigrid's order.
var keyDoorDirs = [4][2]int{{1, 0}, {0, 1}, {-1, 0}, {0, -1}}

// KeyDoor is a symbolic DoorKey grid, after Minigrid's DoorKey as used by
// TER (Hong et al. 2022, appendix D.2): the agent must pick up the key,
// unlock the door in the wall and walk to the goal. No pixels: the
// observation is a one-hot code of the symbolic state.
//
// Layout of a grid of side S (cells (x, y), 0 <= x, y < S, y downwards):
// walls all round; a vertical wall at x = split with one door at
// (split, doorY); the goal at (S-2, S-2); the key somewhere left of the
// wall. The fixed layout (the default) has split = S/2, doorY = S/2-1, the
// key at (1, S-2) and the agent at (1, 1) facing east. With
// WithRandomLayout every Reset draws, in this order and as Minigrid does,
// split uniform in [2, S-2), the agent's cell uniform among the cells left
// of the wall and its direction uniform, doorY uniform in [1, S-2), and the
// key's cell uniform among the other cells left of the wall.
//
//   - Actions (Discrete(5)): KeyDoorLeft, KeyDoorRight, KeyDoorForward,
//     KeyDoorPickup, KeyDoorToggle. As in Minigrid, forward enters an
//     empty cell, the goal or an open door and is a no-op otherwise (walls,
//     the key, a closed or locked door); pickup takes the key from the cell
//     ahead if it is there; toggle on the door unlocks and opens it when
//     the agent carries the key, and opens or closes it once unlocked.
//     The key cannot be dropped.
//   - Reward: -1 per step; the step that enters the goal gets the goal
//     reward instead (default: the time limit, TER's +MAXSTEPS).
//   - Terminated on entering the goal; truncated after 10·S² steps
//     (Minigrid's default max_steps, 360 for S = 6).
//   - Observation: one-hot x (S values), one-hot y (S), one-hot direction
//     (4), carrying the key (1), one-hot door state locked/closed/open
//     (3): 2S+8 values in [0, 1]. With a random layout, one-hot split,
//     doorY, key x and key y follow (4S more). With WithTabular (fixed
//     layout only) it is instead a one-hot code of the whole state, 24(S-2)²
//     values (384 for S = 6) with the 1 at KeyDoor.TabularIndex: tabular
//     features, on which a linear Q-function is a table (TER's design
//     notes, §6.3: "Q: tabular on a fixed layout"). The factored code
//     makes a small network share values between states that differ only
//     in the key or the door, which is what the task turns on.
//   - StateHash: an exact packing of (x, y, direction, carrying, door
//     state) and the layout (split, doorY, key cell), 5 bits per
//     coordinate.
//
// Not safe for concurrent use.
type KeyDoor struct {
	episode
	size       int
	random     bool
	tabular    bool
	goalReward float64

	// Layout. Invariant: 2 <= split <= size-3, 1 <= doorY <= size-3, the
	// key cell is left of the wall.
	split, doorY int
	keyX, keyY   int
	// Agent state.
	x, y, dir int
	carrying  bool
	door      int // doorLocked, doorClosed or doorOpen
}

var (
	_ Env         = (*KeyDoor)(nil)
	_ StateHasher = (*KeyDoor)(nil)
)

// NewKeyDoor returns the grid. It accepts WithSize (the side S, outer
// walls included, KeyDoorMinSize <= S <= KeyDoorMaxSize; default 6),
// WithRandomLayout or WithTabular (not both), WithMaxSteps (default 10·S²)
// and WithGoalReward (default: the time limit).
func NewKeyDoor(opts ...Option) (*KeyDoor, error) {
	o, err := parseOptions("KeyDoor", optSize|optRandomLayout|optGoalReward|optTabular, opts)
	if err != nil {
		return nil, err
	}
	if o.randomLayout && o.tabular {
		return nil, fmt.Errorf("%w: KeyDoor: WithTabular codes the states of the fixed layout; it does not combine with WithRandomLayout", ErrBadOption)
	}
	size := KeyDoorDefaultSize
	if o.set&optSize != 0 {
		size = o.size
	}
	if size < KeyDoorMinSize || size > KeyDoorMaxSize {
		return nil, fmt.Errorf("%w: KeyDoor: WithSize(%d): the grid side must be in [%d, %d]", ErrBadOption, size, KeyDoorMinSize, KeyDoorMaxSize)
	}
	name := "KeyDoor"
	switch {
	case o.randomLayout:
		name = "KeyDoor-Random"
	case o.tabular:
		name = "KeyDoor-Tabular"
	}
	e := &KeyDoor{size: size, random: o.randomLayout, tabular: o.tabular}
	e.init(name, o.limit(10*size*size))
	e.goalReward = float64(e.limit)
	if o.set&optGoalReward != 0 {
		e.goalReward = o.goalReward
	}
	e.layout()
	return e, nil
}

// Size is the grid side S.
func (e *KeyDoor) Size() int { return e.size }

// ObservationSpace implements Env: Box[0, 1]^(2S+8), ^(6S+8) with a
// random layout, ^(24(S-2)²) with WithTabular. O(dimension); allocates.
func (e *KeyDoor) ObservationSpace() Box { return uniformBox(e.obsDim(), 0, 1) }

func (e *KeyDoor) obsDim() int {
	switch {
	case e.random:
		return 6*e.size + 8
	case e.tabular:
		return keyDoorStates * (e.size - 2) * (e.size - 2)
	}
	return 2*e.size + 8
}

// keyDoorStates is the number of states per inner cell: 4 directions ×
// carrying or not × 3 door states.
const keyDoorStates = 4 * 2 * 3

// TabularIndex is the position of the 1 in the WithTabular observation of
// the current state: ((((y-1)(S-2) + x-1)·4 + direction)·2 + carrying)·3
// + door state, over the inner cells (1 <= x, y <= S-2; the inner wall's
// cells are coded but never occupied). It is defined for every layout but
// injective only on a fixed one. O(1).
func (e *KeyDoor) TabularIndex() int {
	c := 0
	if e.carrying {
		c = 1
	}
	return ((((e.y-1)*(e.size-2)+e.x-1)*4+e.dir)*2+c)*3 + e.door
}

// ActionSpace implements Env: Discrete(5).
func (e *KeyDoor) ActionSpace() Space { return Discrete{N: 5} }

// Reset implements Env. O(observation dimension): with a random layout it
// draws the layout from the environment's generator (see the type doc).
func (e *KeyDoor) Reset(seed uint64) []float64 {
	e.begin(seed)
	e.layout()
	return e.obs()
}

// layout sets the fixed layout or draws a random one, and the agent's
// start.
func (e *KeyDoor) layout() {
	s := e.size
	e.carrying, e.door = false, doorLocked
	if !e.random {
		e.split, e.doorY = s/2, s/2-1
		e.keyX, e.keyY = 1, s-2
		e.x, e.y, e.dir = 1, 1, 0
		return
	}
	e.split = 2 + e.rng.IntN(s-4)
	w := e.split - 1 // columns left of the wall
	cells := w * (s - 2)
	agent := e.rng.IntN(cells)
	e.dir = e.rng.IntN(4)
	e.doorY = 1 + e.rng.IntN(s-3)
	key := e.rng.IntN(cells - 1)
	if key >= agent {
		key++
	}
	e.x, e.y = 1+agent%w, 1+agent/w
	e.keyX, e.keyY = 1+key%w, 1+key/w
}

// Cell contents.
const (
	cellEmpty = iota
	cellWall
	cellDoor
	cellKey
	cellGoal
)

func (e *KeyDoor) cell(x, y int) int {
	s := e.size
	switch {
	case x <= 0 || y <= 0 || x >= s-1 || y >= s-1:
		return cellWall
	case x == e.split:
		if y == e.doorY {
			return cellDoor
		}
		return cellWall
	case !e.carrying && x == e.keyX && y == e.keyY:
		return cellKey
	case x == s-2 && y == s-2:
		return cellGoal
	}
	return cellEmpty
}

// Step implements Env. O(observation dimension): S, or (S-2)² with
// WithTabular.
func (e *KeyDoor) Step(a Action) (StepResult, error) {
	if err := e.check(); err != nil {
		return StepResult{}, err
	}
	act, err := e.discreteAction(a, 5)
	if err != nil {
		return StepResult{}, err
	}
	fx, fy := e.x+keyDoorDirs[e.dir][0], e.y+keyDoorDirs[e.dir][1]
	front := e.cell(fx, fy)
	terminated := false
	switch act {
	case KeyDoorLeft:
		e.dir = (e.dir + 3) % 4
	case KeyDoorRight:
		e.dir = (e.dir + 1) % 4
	case KeyDoorForward:
		if front == cellEmpty || front == cellGoal || (front == cellDoor && e.door == doorOpen) {
			e.x, e.y = fx, fy
			terminated = front == cellGoal
		}
	case KeyDoorPickup:
		if front == cellKey {
			e.carrying = true
		}
	case KeyDoorToggle:
		if front == cellDoor {
			switch e.door {
			case doorLocked:
				if e.carrying {
					e.door = doorOpen
				}
			case doorClosed:
				e.door = doorOpen
			case doorOpen:
				e.door = doorClosed
			}
		}
	}
	reward := -1.0
	if terminated {
		reward = e.goalReward
	}
	return e.end(e.obs(), reward, terminated), nil
}

func (e *KeyDoor) obs() []float64 {
	s := e.size
	o := make([]float64, e.obsDim())
	if e.tabular {
		o[e.TabularIndex()] = 1
		return o
	}
	o[e.x] = 1
	o[s+e.y] = 1
	o[2*s+e.dir] = 1
	if e.carrying {
		o[2*s+4] = 1
	}
	o[2*s+5+e.door] = 1
	if e.random {
		b := 2*s + 8
		o[b+e.split] = 1
		o[b+s+e.doorY] = 1
		o[b+2*s+e.keyX] = 1
		o[b+3*s+e.keyY] = 1
	}
	return o
}

// StateHash implements StateHasher: bits 0-4 x, 5-9 y, 10-11 direction,
// 12 carrying, 13-14 door state, 15-19 split, 20-24 doorY, 25-29 key x,
// 30-34 key y. Injective for a given size. O(1).
func (e *KeyDoor) StateHash() uint64 {
	h := uint64(e.x) | uint64(e.y)<<5 | uint64(e.dir)<<10 | uint64(e.door)<<13 |
		uint64(e.split)<<15 | uint64(e.doorY)<<20 | uint64(e.keyX)<<25 | uint64(e.keyY)<<30
	if e.carrying {
		h |= 1 << 12
	}
	return h
}

// String draws the grid, one row per line: '#' wall, 'D' locked door, 'd'
// closed door, '/' open door, 'K' key, 'G' goal, '.' empty, and the agent
// as '>', 'v', '<' or '^' by direction; while the agent carries the key a
// last line reads "key". O(S²).
func (e *KeyDoor) String() string {
	var sb strings.Builder
	for y := range e.size {
		for x := range e.size {
			if x == e.x && y == e.y {
				sb.WriteByte(">v<^"[e.dir])
				continue
			}
			switch e.cell(x, y) {
			case cellWall:
				sb.WriteByte('#')
			case cellDoor:
				sb.WriteByte("Dd/"[e.door])
			case cellKey:
				sb.WriteByte('K')
			case cellGoal:
				sb.WriteByte('G')
			default:
				sb.WriteByte('.')
			}
		}
		sb.WriteByte('\n')
	}
	if e.carrying {
		sb.WriteString("key\n")
	}
	return sb.String()
}
