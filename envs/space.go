package envs

import (
	"math"
	"strconv"
	"strings"
)

// Space is an action space: a Discrete or a Box. Switch on the type to read
// its size; ContainsAction checks an Action against it.
type Space interface {
	// ContainsAction reports whether a is an element of the space: for a
	// Discrete, Vec is nil and Index is in range; for a Box, Vec lies in it.
	ContainsAction(a Action) bool
	// String describes the space, e.g. "Discrete(2)" or "Box[-2, 2]".
	String() string

	space()
}

var (
	_ Space = Discrete{}
	_ Space = Box{}
)

// Discrete is the set {0, 1, ..., N-1}.
type Discrete struct {
	N int
}

// Contains reports whether 0 <= i < N. O(1).
func (d Discrete) Contains(i int) bool { return i >= 0 && i < d.N }

// ContainsAction implements Space. O(1).
func (d Discrete) ContainsAction(a Action) bool { return a.Vec == nil && d.Contains(a.Index) }

func (d Discrete) String() string { return "Discrete(" + strconv.Itoa(d.N) + ")" }

func (Discrete) space() {}

// Box is the axis-aligned box of vectors x with Low[i] <= x[i] <= High[i].
// Bounds may be infinite; Low and High have equal lengths. Environments
// hand out copies of their boxes.
type Box struct {
	Low, High []float64
}

// Dim is the length of the vectors in the box.
func (b Box) Dim() int { return len(b.Low) }

// Contains reports whether x has length Dim and every x[i] lies in
// [Low[i], High[i]]; a NaN is never contained, and a malformed box (Low
// and High of different lengths) contains nothing. O(Dim).
func (b Box) Contains(x []float64) bool {
	if len(x) != len(b.Low) || len(b.High) != len(b.Low) {
		return false
	}
	for i, v := range x {
		if !(v >= b.Low[i] && v <= b.High[i]) {
			return false
		}
	}
	return true
}

// ContainsAction implements Space: Contains(a.Vec). O(Dim).
func (b Box) ContainsAction(a Action) bool { return b.Contains(a.Vec) }

// String prints the box as "Box[lo, hi]" (one dimension), "Box[lo, hi]^n"
// (n dimensions with equal bounds) or "Box[lo0..hi0, lo1..hi1, ...]";
// a malformed box (Low and High of different lengths) prints as such.
// O(Dim).
func (b Box) String() string {
	n := len(b.Low)
	if len(b.High) != n {
		return "Box(malformed: " + strconv.Itoa(n) + " lows, " + strconv.Itoa(len(b.High)) + " highs)"
	}
	same := n > 0
	for i := range n {
		same = same && b.Low[i] == b.Low[0] && b.High[i] == b.High[0]
	}
	switch {
	case same && n == 1:
		return "Box[" + num(b.Low[0]) + ", " + num(b.High[0]) + "]"
	case same:
		return "Box[" + num(b.Low[0]) + ", " + num(b.High[0]) + "]^" + strconv.Itoa(n)
	}
	var sb strings.Builder
	sb.WriteString("Box[")
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(num(b.Low[i]) + ".." + num(b.High[i]))
	}
	sb.WriteString("]")
	return sb.String()
}

func (Box) space() {}

func num(v float64) string {
	if math.IsInf(v, 0) {
		if v > 0 {
			return "inf"
		}
		return "-inf"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// uniformBox returns a Box of dimension n with every bound lo..hi.
func uniformBox(n int, lo, hi float64) Box {
	b := Box{Low: make([]float64, n), High: make([]float64, n)}
	for i := range n {
		b.Low[i], b.High[i] = lo, hi
	}
	return b
}

// symmetricBox returns the Box [-high[i], high[i]].
func symmetricBox(high ...float64) Box {
	b := Box{Low: make([]float64, len(high)), High: append([]float64(nil), high...)}
	for i, h := range high {
		b.Low[i] = -h
	}
	return b
}

// float32Box rounds b's bounds to float32, in place, and returns it.
// Gymnasium declares the classic control spaces with dtype float32; using
// the same rounded bounds keeps states that Gymnasium stores in float32
// (MountainCarContinuous can sit at float32(-1.2) < -1.2) inside.
func float32Box(b Box) Box {
	for i := range b.Low {
		b.Low[i] = float64(float32(b.Low[i]))
		b.High[i] = float64(float32(b.High[i]))
	}
	return b
}
