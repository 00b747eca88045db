package learner

import (
	"errors"
	"fmt"
	"io"

	"github.com/apexrl/apex/checkpoint"
)

// The ReF-ER controller's checkpoint section: kind
// "learner.REFERController", version 1, whose payload is one JSON value
// (checkpoint.WriteJSON) holding the learner step k of the last AfterStep
// and beta. Nothing per step is written: the stored episodes are the
// buffer's, and a stage built over a loaded buffer reports them to the
// controller with rho = 1 and fresh Retrace targets; c_max and the
// learning-rate scale are functions of k, and the first recount puts n_far
// right. V-RACER and TD3 (under a ReF-ER method) nest this section in
// their own.
const (
	referKind      = "learner.REFERController"
	referVersion   = 1
	referMaxHeader = 1 << 10
)

// referState is the payload of the controller's section.
type referState struct {
	K    uint64  `json:"k"`
	Beta float64 `json:"beta"`
}

// Save writes the controller's state (the step k and beta) to w as its own
// checkpoint section (format above). Call it from the goroutine that
// steps. Cost: O(1).
func (c *REFERController) Save(w io.Writer) error {
	if w == nil {
		return fmt.Errorf("%w: Save to a nil io.Writer", ErrConfig)
	}
	return checkpoint.Save(w, referKind, referVersion, func(w io.Writer) error {
		return checkpoint.WriteJSON(w, referState{K: c.k, Beta: c.beta})
	})
}

// Load restores a state written by Save (SetController of its k and
// beta), reading exactly the section's bytes from r. A stream that is not
// such a section, or a beta outside [0, 1], is an error wrapping
// ErrCorrupt, and the controller is unchanged. Call it from the goroutine
// that steps. Cost: O(1).
func (c *REFERController) Load(r io.Reader) error {
	if r == nil {
		return fmt.Errorf("%w: Load from a nil io.Reader", ErrConfig)
	}
	st, err := readReferState(r)
	if err != nil {
		return err
	}
	return c.SetController(st.K, st.Beta)
}

// readReferState reads and checks a controller section (errors wrap
// ErrCorrupt, or are r's own failure).
func readReferState(r io.Reader) (referState, error) {
	var st referState
	err := checkpoint.Load(r, referKind, referVersion, func(_ uint32, r io.Reader) error {
		return checkpoint.ReadJSON(r, &st, referMaxHeader)
	})
	switch {
	case err == nil:
	case errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, checkpoint.ErrFormat):
		return st, errorf(ErrCorrupt, "ReF-ER controller: %w", err)
	default:
		return st, fmt.Errorf("learner: reading the ReF-ER controller: %w", err)
	}
	if !(st.Beta >= 0 && st.Beta <= 1) {
		return st, errorf(ErrCorrupt, "ReF-ER controller: beta %v outside [0, 1]", st.Beta)
	}
	return st, nil
}
