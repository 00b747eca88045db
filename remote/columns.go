package remote

import (
	"errors"
	"fmt"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
)

// ErrColumns marks a batch whose columns do not fit the table's layout
// (wrong byte length, a required column missing, a column the table does
// not store, the wrong number of extra float columns). The wrapped message
// names the column, what was expected and what was given.
var ErrColumns = errors.New("remote: malformed columns")

// EncodeTransitions writes t's columns into dst for a table of layout cfg
// (the table's buffer.Config): rows = t.Len(), every column t holds as
// little-endian bytes, absent optional columns empty, and one floats entry
// per extra float column of cfg (empty where t has none). dst's byte
// slices are reused (truncated and refilled), so a sender that encodes
// into the same Columns after each Send allocates nothing once they have
// grown.
//
// It checks t's shape as Buffer.Insert would (required columns full,
// optional ones empty or full, columns cfg does not store empty) and
// returns an error wrapping ErrColumns that names the column; values (NaN,
// the action range, priorities) are left to the server's Insert. On error
// dst's contents are unspecified. O(bytes of t). Not safe for concurrent
// use of one dst.
func EncodeTransitions(dst *replayv1.Columns, cfg buffer.Config, t *buffer.Transitions) error {
	if dst == nil || t == nil {
		return fmt.Errorf("%w: nil Columns or Transitions", ErrColumns)
	}
	return encode(dst, &cfg, t, t.Len(), false)
}

// EncodeBatch writes rows [0, rows) of b, a batch made by NewBatch of a
// buffer with config cfg, into dst: every column the table stores (flags
// included), no priority column. A server that gathers the found rows of
// a Fetch to the front of its batch encodes just those. Reuses dst's
// storage like EncodeTransitions. Errors (wrapping ErrColumns): rows
// outside [0, b.Len()], or a column of b shorter than rows need. O(bytes
// of the rows).
func EncodeBatch(dst *replayv1.Columns, cfg buffer.Config, b *buffer.Batch, rows int) error {
	if dst == nil || b == nil {
		return fmt.Errorf("%w: nil Columns or Batch", ErrColumns)
	}
	if rows < 0 || rows > b.Len() {
		return fmt.Errorf("%w: %d rows asked of a batch of %d", ErrColumns, rows, b.Len())
	}
	return encode(dst, &cfg, &b.Transitions, rows, true)
}

// DecodeTransitions fills dst from c for a table of layout cfg, reusing
// dst's column storage (a column is reallocated only when it lacks the
// capacity; nothing is allocated per row). Absent optional columns leave
// dst's column empty (Buffer.Insert stores zeros, or the maximum priority).
//
// It is strict: rows must match every present column, whose byte length
// must be rows × width × element size; obs, next_obs, reward, discount and
// the action column of the table's kind are required (when rows > 0);
// columns the table does not store must be empty; floats must have exactly
// one entry per extra float column of cfg (each empty or full). Errors wrap
// ErrColumns and name the column, the length expected and the length got;
// dst's contents are then unspecified. Values are not checked here (the
// buffer's Insert checks them). O(bytes of c). c is only read; dst must
// not be used concurrently.
func DecodeTransitions(dst *buffer.Transitions, cfg buffer.Config, c *replayv1.Columns) error {
	if dst == nil || c == nil {
		return fmt.Errorf("%w: nil Transitions or Columns", ErrColumns)
	}
	d := coder{n: uint64(c.GetRows())}
	disc := cfg.Action == buffer.Discrete
	dst.Obs = decCol(&d, "obs", dst.Obs, c.Obs, cfg.ObsDim, true, true)
	dst.NextObs = decCol(&d, "next_obs", dst.NextObs, c.NextObs, cfg.ObsDim, true, true)
	dst.Action = decCol(&d, "action", dst.Action, c.Action, 1, disc, true)
	dst.ActionVec = decCol(&d, "action_vec", dst.ActionVec, c.ActionVec, cfg.ActionDim, !disc, true)
	dst.Reward = decCol(&d, "reward", dst.Reward, c.Reward, 1, true, true)
	dst.Discount = decCol(&d, "discount", dst.Discount, c.Discount, 1, true, true)
	dst.Flags = decCol(&d, "flags", dst.Flags, c.Flags, 1, true, false)
	dst.EpisodeID = decCol(&d, "episode_id", dst.EpisodeID, c.EpisodeId, 1, cfg.Episode, false)
	dst.EpisodeStep = decCol(&d, "episode_step", dst.EpisodeStep, c.EpisodeStep, 1, cfg.Episode, false)
	dst.GlobalStep = decCol(&d, "global_step", dst.GlobalStep, c.GlobalStep, 1, cfg.GlobalStep, false)
	dst.ActorID = decCol(&d, "actor_id", dst.ActorID, c.ActorId, 1, cfg.ActorID, false)
	dst.StateHash = decCol(&d, "state_hash", dst.StateHash, c.StateHash, 1, cfg.StateHash, false)
	dst.NextStateHash = decCol(&d, "next_state_hash", dst.NextStateHash, c.NextStateHash, 1, cfg.StateHash, false)
	dst.Priority = decCol(&d, "priority", dst.Priority, c.Priority, 1, true, false)
	if d.err == nil && len(c.Floats) != len(cfg.Floats) {
		d.err = fmt.Errorf("%w: %d floats columns given, the table has %d", ErrColumns, len(c.Floats), len(cfg.Floats))
	}
	dst.Floats = growSlice(dst.Floats, len(cfg.Floats))
	d.floats = true
	for i, f := range cfg.Floats {
		var src []byte
		if i < len(c.Floats) {
			src = c.Floats[i]
		}
		dst.Floats[i] = decCol(&d, f.Name, dst.Floats[i], src, f.Width, true, false)
	}
	return d.err
}

// RowBytes is the size of one row of cfg's columns on the wire as
// EncodeBatch writes it (every stored column, no priority), without the
// protobuf framing. A sender sizes its batches under MaxMessageBytes with
// it. O(len(cfg.Floats)).
func RowBytes(cfg buffer.Config) int {
	n := 4 * (2*cfg.ObsDim + 3) // obs, next_obs, reward, discount, flags
	if cfg.Action == buffer.Discrete {
		n += 4
	} else {
		n += 4 * cfg.ActionDim
	}
	if cfg.Episode {
		n += 12
	}
	if cfg.GlobalStep {
		n += 8
	}
	if cfg.ActorID {
		n += 4
	}
	if cfg.StateHash {
		n += 16
	}
	for _, f := range cfg.Floats {
		n += 4 * f.Width
	}
	return n
}

// coder carries a column walk's row count and first error.
type coder struct {
	n      uint64 // rows
	prefix bool   // encode: columns may be longer than n rows (a Batch's)
	floats bool   // the columns walked now are extra float columns
	err    error
}

// column names a column in an error: name, or floats[name] for an extra
// float column (built only for an error, so the good path allocates
// nothing).
func (c *coder) column(name string) string {
	if c.floats {
		return "floats[" + name + "]"
	}
	return name
}

// encode writes the first n rows of t into dst (see EncodeTransitions and
// EncodeBatch; prefix selects the latter's rules).
func encode(dst *replayv1.Columns, cfg *buffer.Config, t *buffer.Transitions, n int, prefix bool) error {
	if uint64(n) > uint64(^uint32(0)) {
		return fmt.Errorf("%w: %d rows exceed the wire's 2^32-1", ErrColumns, n)
	}
	e := coder{n: uint64(n), prefix: prefix}
	disc := cfg.Action == buffer.Discrete
	dst.Rows = uint32(n)
	dst.Obs = encCol(&e, "obs", dst.Obs, t.Obs, cfg.ObsDim, true, true)
	dst.NextObs = encCol(&e, "next_obs", dst.NextObs, t.NextObs, cfg.ObsDim, true, true)
	dst.Action = encCol(&e, "action", dst.Action, t.Action, 1, disc, true)
	dst.ActionVec = encCol(&e, "action_vec", dst.ActionVec, t.ActionVec, cfg.ActionDim, !disc, true)
	dst.Reward = encCol(&e, "reward", dst.Reward, t.Reward, 1, true, true)
	dst.Discount = encCol(&e, "discount", dst.Discount, t.Discount, 1, true, true)
	dst.Flags = encCol(&e, "flags", dst.Flags, t.Flags, 1, true, false)
	dst.EpisodeId = encCol(&e, "episode_id", dst.EpisodeId, t.EpisodeID, 1, cfg.Episode, false)
	dst.EpisodeStep = encCol(&e, "episode_step", dst.EpisodeStep, t.EpisodeStep, 1, cfg.Episode, false)
	dst.GlobalStep = encCol(&e, "global_step", dst.GlobalStep, t.GlobalStep, 1, cfg.GlobalStep, false)
	dst.ActorId = encCol(&e, "actor_id", dst.ActorId, t.ActorID, 1, cfg.ActorID, false)
	dst.StateHash = encCol(&e, "state_hash", dst.StateHash, t.StateHash, 1, cfg.StateHash, false)
	dst.NextStateHash = encCol(&e, "next_state_hash", dst.NextStateHash, t.NextStateHash, 1, cfg.StateHash, false)
	if prefix {
		dst.Priority = dst.Priority[:0]
	} else {
		dst.Priority = encCol(&e, "priority", dst.Priority, t.Priority, 1, true, false)
	}
	if e.err == nil && len(t.Floats) != 0 && len(t.Floats) != len(cfg.Floats) {
		e.err = fmt.Errorf("%w: %d float columns given, the table has %d", ErrColumns, len(t.Floats), len(cfg.Floats))
	}
	dst.Floats = growSlice(dst.Floats, len(cfg.Floats))
	e.floats = true
	for i, f := range cfg.Floats {
		var src []float32
		if i < len(t.Floats) {
			src = t.Floats[i]
		}
		dst.Floats[i] = encCol(&e, f.Name, dst.Floats[i], src, f.Width, true, false)
	}
	return e.err
}

// encCol encodes one column of width values per row into dst's storage,
// recording the first shape error in e.
func encCol[T word](e *coder, name string, dst []byte, src []T, width int, enabled, required bool) []byte {
	dst = dst[:0]
	if e.err != nil {
		return dst
	}
	want := e.n * uint64(width)
	got := uint64(len(src))
	switch {
	case !enabled && got != 0:
		e.err = fmt.Errorf("%w: column %s is not stored by the table, got %d values", ErrColumns, e.column(name), got)
		return dst
	case !enabled, got == 0 && !required:
		return dst
	case e.prefix && got >= want:
		src = src[:want]
	case got != want:
		e.err = fmt.Errorf("%w: column %s has %d values, want %d (%d rows × %d)", ErrColumns, e.column(name), got, want, e.n, width)
		return dst
	}
	return appendLE(dst, src)
}

// decCol decodes one column of width values per row into dst's storage,
// recording the first shape error in d.
func decCol[T word](d *coder, name string, dst []T, src []byte, width int, enabled, required bool) []T {
	dst = dst[:0]
	if d.err != nil {
		return dst
	}
	size := uint64(sizeOf[T]())
	want := d.n * uint64(width) * size // < 2^32 · 2^20 · 8: no overflow
	got := uint64(len(src))
	switch {
	case !enabled && got != 0:
		d.err = fmt.Errorf("%w: column %s is not stored by the table, got %d bytes", ErrColumns, d.column(name), got)
		return dst
	case !enabled, got == 0 && !required:
		return dst
	case got != want:
		what := "has"
		if got == 0 {
			what = "is required but has"
		}
		d.err = fmt.Errorf("%w: column %s %s %d bytes, want %d (%d rows × %d values × %d bytes)", ErrColumns, d.column(name), what, got, want, d.n, width, size)
		return dst
	}
	return decodeLE(dst, src)
}
