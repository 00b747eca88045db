package sampler

import (
	"fmt"

	"github.com/apexrl/apex/buffer"
)

// Names of the buffer's float columns the REFER stage and V-RACER read
// (buffer.Config.Floats); an actor for them writes each step's values
// (actor.Gaussian does).
const (
	// REFERMeanColumn holds the behaviour policy's mean μ_t, dA values,
	// in the policy's units (those of the stored action).
	REFERMeanColumn = "refer.mean"
	// REFERStdColumn holds the behaviour policy's std, dA values.
	REFERStdColumn = "refer.std"
	// REFERBootColumn holds, on the last step of an episode cut by a time
	// limit (FlagTruncated), the behaviour network's V(s_T) of the state
	// the episode was cut at (1 value; 0 on other steps): the Retrace
	// bootstrap until the learner samples that step and refreshes it.
	REFERBootColumn = "refer.vboot"
)

// REFERColumns returns the float columns a buffer for the REFER stage
// needs, for actions of dA values: mean and std (dA each) and the
// bootstrap value (1). Append them to buffer.Config.Floats (any order,
// beside other columns); the buffer must also store continuous actions of
// ActionDim dA and the episode columns (Config.Episode).
func REFERColumns(dA int) []buffer.FloatColumn {
	return []buffer.FloatColumn{
		{Name: REFERMeanColumn, Width: dA},
		{Name: REFERStdColumn, Width: dA},
		{Name: REFERBootColumn, Width: 1},
	}
}

// REFERColumnIndex returns the indices in cfg.Floats of the mean, std and
// bootstrap columns (REFERColumns), or an error wrapping buffer.ErrConfig
// naming what is missing or of the wrong width (the buffer's ActionDim is
// dA).
func REFERColumnIndex(cfg buffer.Config) (mean, std, boot int, err error) {
	if cfg.Action != buffer.Continuous {
		return 0, 0, 0, fmt.Errorf("%w: refer: the buffer must store continuous actions, it stores %v ones", buffer.ErrConfig, cfg.Action)
	}
	if !cfg.Episode {
		return 0, 0, 0, fmt.Errorf("%w: refer: the buffer must store the episode columns (buffer.Config.Episode): ReF-ER keeps whole episodes", buffer.ErrConfig)
	}
	idx := [3]int{-1, -1, -1}
	for i, want := range REFERColumns(cfg.ActionDim) {
		for k, f := range cfg.Floats {
			if f.Name != want.Name {
				continue
			}
			if f.Width != want.Width {
				return 0, 0, 0, fmt.Errorf("%w: refer: float column %q has width %d, want %d", buffer.ErrConfig, f.Name, f.Width, want.Width)
			}
			idx[i] = k
		}
		if idx[i] < 0 {
			return 0, 0, 0, fmt.Errorf("%w: refer: the buffer has no float column %q (add sampler.REFERColumns(%d) to buffer.Config.Floats)", buffer.ErrConfig, want.Name, cfg.ActionDim)
		}
	}
	return idx[0], idx[1], idx[2], nil
}
