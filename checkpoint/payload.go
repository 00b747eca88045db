package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// Helpers for the pieces most payloads are made of: a JSON header and
// vectors of float64. They write and read little endian; they frame
// nothing (the section does), but every length they read is bounded
// before it is allocated.

// WriteJSON writes v as JSON, preceded by its length (uint32). Cost: the
// encoding, built in memory.
func WriteJSON(w io.Writer, v any) error {
	js, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if uint64(len(js)) > math.MaxUint32 {
		return fmt.Errorf("checkpoint: a JSON value of %d bytes", len(js))
	}
	b := make([]byte, 4, 4+len(js))
	binary.LittleEndian.PutUint32(b, uint32(len(js)))
	_, err = w.Write(append(b, js...))
	return err
}

// ReadJSON reads what WriteJSON wrote into v: a length above limit is
// refused before anything is allocated, the bytes are read as they arrive
// (a short stream allocates no more than it holds), and unknown fields or
// data after the value are refused. Damage is an error wrapping
// ErrCorrupt; a failure of r is returned as is.
func ReadJSON(r io.Reader, v any, limit int) error {
	var n [4]byte
	if err := readFull(r, n[:], "JSON length"); err != nil {
		return err
	}
	size := binary.LittleEndian.Uint32(n[:])
	if uint64(size) > uint64(max(limit, 0)) {
		return fmt.Errorf("%w: a JSON header of %d bytes (at most %d)", ErrCorrupt, size, limit)
	}
	js, err := io.ReadAll(io.LimitReader(r, int64(size)))
	if err != nil {
		return err
	}
	if len(js) < int(size) {
		return fmt.Errorf("%w: JSON header truncated: %d of %d bytes: %w", ErrCorrupt, len(js), size, io.ErrUnexpectedEOF)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: JSON header: %w", ErrCorrupt, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: JSON header: data after the value", ErrCorrupt)
	}
	return nil
}

// floatStep is the number of float64 values encoded or read per step.
const floatStep = 4096

// WriteFloat64s writes len(s) (uint64), then the values' IEEE-754 bits.
// Cost: O(len(s)), through a 32 KiB scratch buffer.
func WriteFloat64s(w io.Writer, s []float64) error {
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, 8*min(len(s)+1, floatStep)), uint64(len(s)))
	for len(s) > 0 {
		k := min(len(s), floatStep-len(b)/8)
		for _, x := range s[:k] {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
		s = s[k:]
		if _, err := w.Write(b); err != nil {
			return err
		}
		b = b[:0]
	}
	if len(b) > 0 {
		_, err := w.Write(b)
		return err
	}
	return nil
}

// ReadFloat64s reads what WriteFloat64s wrote, which must hold exactly
// want values (ErrCorrupt otherwise, before anything is allocated). The
// values are read in steps as they arrive, so memory grows with the data
// the stream actually holds. NaN and infinities are returned as they are:
// the caller checks what its values may be.
func ReadFloat64s(r io.Reader, want int) ([]float64, error) {
	var n [8]byte
	if err := readFull(r, n[:], "vector length"); err != nil {
		return nil, err
	}
	if got := binary.LittleEndian.Uint64(n[:]); want < 0 || got != uint64(want) {
		return nil, fmt.Errorf("%w: %d values stored, want %d", ErrCorrupt, got, want)
	}
	s := make([]float64, 0, min(want, floatStep))
	var b [8 * floatStep]byte
	for len(s) < want {
		k := min(want-len(s), floatStep)
		if err := readFull(r, b[:8*k], "vector"); err != nil {
			return nil, err
		}
		for i := range k {
			s = append(s, math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		}
	}
	return s, nil
}

// readFull is io.ReadFull with the end of the stream reported as
// ErrCorrupt and io.ErrUnexpectedEOF.
func readFull(r io.Reader, p []byte, what string) error {
	if _, err := io.ReadFull(r, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: truncated in the %s: %w", ErrCorrupt, what, io.ErrUnexpectedEOF)
		}
		return err
	}
	return nil
}
