package buffer

import "errors"

// Sentinel errors. Validation errors wrap one of these with %w and say what
// was wrong, so callers can test with errors.Is and still print a useful
// message.
var (
	// ErrConfig: a Config field is out of range.
	ErrConfig = errors.New("buffer: invalid config")
	// ErrShape: a column has the wrong length for the batch or the config.
	ErrShape = errors.New("buffer: mismatched dimensions")
	// ErrPriority: a priority is NaN, infinite or negative.
	ErrPriority = errors.New("buffer: invalid priority")
	// ErrNonFinite: Insert was given a NaN or infinite observation,
	// action, reward, discount or float column value (it would poison
	// learning, and a checkpoint could not hold it).
	ErrNonFinite = errors.New("buffer: non-finite value")
	// ErrEmpty: sampling a buffer that holds no items.
	ErrEmpty = errors.New("buffer: empty")
	// ErrZeroMass: proportional sampling while every stored priority is 0.
	ErrZeroMass = errors.New("buffer: total priority is zero")
	// ErrBatchSize: a batch of 0 items, or more than are stored.
	ErrBatchSize = errors.New("buffer: invalid batch size")
	// ErrNil: a required argument is nil (a *Transitions, *Batch or
	// *rand.Rand).
	ErrNil = errors.New("buffer: nil argument")
	// ErrSlot: a slot index outside the buffer.
	ErrSlot = errors.New("buffer: slot out of range")
	// ErrCorrupt: a checkpoint that cannot be read back (bad magic, version,
	// checksum, truncation or inconsistent contents).
	ErrCorrupt = errors.New("buffer: corrupt checkpoint")
	// ErrRetries: a sample could not find a readable item after many
	// re-draws (every candidate was being overwritten). Only possible under
	// extreme write load on a tiny buffer.
	ErrRetries = errors.New("buffer: too many re-draws")
)
