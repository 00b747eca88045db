package model

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Sentinel errors. Errors returned by this package wrap one of these with
// %w and say what was wrong, so callers can test with errors.Is and still
// print a useful message.
var (
	// ErrConfig: a Config, AdamConfig or SGD field is out of range.
	ErrConfig = errors.New("model: invalid config")
	// ErrShape: parameters of the wrong length for the network.
	ErrShape = errors.New("model: mismatched dimensions")
	// ErrCorrupt: a saved network or optimizer that cannot be read back
	// (empty, truncated, bad magic, unknown version, bad checksum or
	// inconsistent contents).
	ErrCorrupt = errors.New("model: corrupt checkpoint")
	// ErrNonFinite: a NaN or an infinity in a loss, a gradient or a
	// parameter. The error is a *NonFiniteError saying which and where.
	ErrNonFinite = errors.New("model: non-finite value")
)

// NonFiniteError reports a NaN or infinite value: what held it (for example
// "loss", "gradient", "params"), at which index of that vector (-1 for a
// scalar) and, when known, where in the network (Net.Where). It wraps
// ErrNonFinite. The runtime adds the training step when it stops the run.
type NonFiniteError struct {
	What  string
	Index int
	Where string
	Value float64
}

func (e *NonFiniteError) Error() string {
	s := "model: " + e.What
	if e.Index >= 0 {
		s += "[" + strconv.Itoa(e.Index) + "]"
	}
	if e.Where != "" {
		s += " (" + e.Where + ")"
	}
	return s + " is " + strconv.FormatFloat(e.Value, 'g', -1, 64)
}

// Unwrap returns ErrNonFinite.
func (e *NonFiniteError) Unwrap() error { return ErrNonFinite }

// CheckFinite returns nil if every value of xs is finite, and otherwise a
// *NonFiniteError naming what and the first offending index. Cost: O(len(xs)),
// about 1 ns per value; no allocation unless it fails.
func CheckFinite(what string, xs []float64) error {
	if i := firstNonFinite(xs); i >= 0 {
		return &NonFiniteError{What: what, Index: i, Value: xs[i]}
	}
	return nil
}

// CheckFiniteValue returns nil if v is finite, and otherwise a
// *NonFiniteError naming what (Index -1). Use it on a loss:
// CheckFiniteValue("loss", l).
func CheckFiniteValue(what string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return &NonFiniteError{What: what, Index: -1, Value: v}
	}
	return nil
}

// firstNonFinite returns the index of the first NaN or ±Inf in xs, or -1.
func firstNonFinite(xs []float64) int {
	// x*0 is 0 for a finite x and NaN otherwise: one pass with no branch per
	// value, then a scan only when something is wrong.
	var acc float64
	for _, x := range xs {
		acc += x * 0
	}
	if acc == 0 {
		return -1
	}
	for i, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return i
		}
	}
	return -1
}

// errorf wraps sentinel with a formatted reason.
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}
