package actor

import (
	"fmt"

	"github.com/apexrl/apex/buffer"
)

// Behaviour says where an actor records the policy that drew each action,
// for an off-policy correction that needs the behaviour's density (ReF-ER's
// importance ratios): indices into the buffer's float columns (the Floats
// of GaussianConfig and ContinuousConfig, buffer.Config.Floats). The
// replay method that reads them names the columns; for ReF-ER,
// sampler.REFERColumnIndex of the buffer's Config gives the three indices.
type Behaviour struct {
	// Mean and Std index the columns of the behaviour's mean and std,
	// action-width values each, in the policy's units (those of the
	// stored action).
	Mean, Std int
	// Boot indexes the 1-value column of V(s_T) on the last step of an
	// episode cut by a time limit (0 on other steps). The Gaussian actor
	// fills it; the Continuous actor has no value estimate and ignores it.
	Boot int
}

// check reports an index outside floats, two roles on one column, or a
// column of the wrong width (A values for the mean and std, 1 for the
// bootstrap when boot is set), wrapping ErrConfig; what names the config
// field in the message.
func (b Behaviour) check(what string, floats []buffer.FloatColumn, A int, boot bool) error {
	type col struct {
		name  string
		i, w  int
		check bool
	}
	cols := []col{{"Mean", b.Mean, A, true}, {"Std", b.Std, A, true}, {"Boot", b.Boot, 1, boot}}
	for k, c := range cols {
		if !c.check {
			continue
		}
		if c.i < 0 || c.i >= len(floats) {
			return fmt.Errorf("%w: %s.%s is %d, the buffer has %d float columns", ErrConfig, what, c.name, c.i, len(floats))
		}
		if floats[c.i].Width != c.w {
			return fmt.Errorf("%w: %s.%s: float column %d (%q) has width %d, want %d", ErrConfig, what, c.name, c.i, floats[c.i].Name, floats[c.i].Width, c.w)
		}
		for _, o := range cols[:k] {
			if o.check && o.i == c.i {
				return fmt.Errorf("%w: %s.%s and %s.%s are the same float column %d", ErrConfig, what, o.name, what, c.name, c.i)
			}
		}
	}
	return nil
}
