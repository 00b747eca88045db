package model

import (
	"errors"
	"io"
	"math"

	"github.com/apexrl/apex/checkpoint"
)

// Checkpoints. A Net and an Adam each write one section of the checkpoint
// package's format (its magic, kind, version, chunked payload and CRC-32C):
//
//	model.Net  version 1: JSON header (netHeader: the Config), then the
//	           parameters (checkpoint.WriteFloat64s: count, float64 bits)
//	model.Adam version 1: JSON header (adamHeader: hyper-parameters, step
//	           count, length), then the moments m and v (each as above)
//
// Nothing is decoded before its chunk's checksum has matched, and the
// header must agree with the stored counts. Files of the earlier format
// (magic APEXNET1 or APEXADAM) are refused with an error that names it.
const (
	netKind   = "model.Net"
	adamKind  = "model.Adam"
	ckVersion = 1
	maxHeader = 1 << 20
)

type netHeader struct {
	Config Config `json:"config"`
}

type adamHeader struct {
	Config AdamConfig `json:"config"`
	Steps  uint64     `json:"steps"`
	Len    int        `json:"len"`
}

// Save writes n's configuration and parameters to w as one checkpoint
// section (format above; Clone semantics on LoadNet: buffers and gradients
// are not stored). Cost O(parameters), streamed through one chunk of at
// most 1 MiB.
func (n *Net) Save(w io.Writer) error {
	if w == nil {
		return errorf(ErrConfig, "Save to a nil io.Writer")
	}
	return checkpoint.Save(w, netKind, ckVersion, func(w io.Writer) error {
		if err := checkpoint.WriteJSON(w, netHeader{Config: n.cfg}); err != nil {
			return err
		}
		return checkpoint.WriteFloat64s(w, n.params)
	})
}

// LoadNet reads a network written by Net.Save. It reads exactly the
// section's bytes from r (it does not buffer ahead), so other data may
// follow. An empty, truncated or damaged stream, another kind of section
// or a newer version, a file of the earlier format, a bad checksum or a
// header that does not match the data is an error wrapping ErrCorrupt
// (and io.ErrUnexpectedEOF when truncated) that says which.
//
// A NaN or infinite parameter is refused too: the error wraps ErrCorrupt
// and a *NonFiniteError (ErrNonFinite) naming the first one and its place
// in the network, for example "params[12] (layer 0 W[3,0]) is NaN". Save
// still writes such a network (a failed run's diagnostic checkpoint);
// inspect one with a checkpoint.Reader, not by loading it.
//
// Memory: the header is at most 1 MiB; its Config is validated (at most
// 1024 layers per list and 2^28 parameters) and its parameter count,
// computed without allocating, must equal the stored count before
// anything is read; the values are read in steps as they arrive, so a
// length field cannot make LoadNet allocate much more than the stream
// holds. Cost: O(parameters) time; about 3 × 8 bytes per parameter at the
// peak (the values read, the parameters and their gradients).
func LoadNet(r io.Reader) (*Net, error) {
	if r == nil {
		return nil, errorf(ErrConfig, "LoadNet from a nil io.Reader")
	}
	var n *Net
	err := checkpoint.Load(r, netKind, ckVersion, func(_ uint32, r io.Reader) error {
		var h netHeader
		if err := checkpoint.ReadJSON(r, &h, maxHeader); err != nil {
			return err
		}
		cfg, err := h.Config.Validate()
		if err != nil {
			return errorf(ErrCorrupt, "network config: %w", err)
		}
		vals, err := readValues(r, cfg.numParams(), "parameters", "the config needs")
		if err != nil {
			return err
		}
		if n, err = NewNet(cfg, nil); err != nil {
			return errorf(ErrCorrupt, "network config: %w", err)
		}
		copy(n.params, vals)
		if err := n.CheckFinite(); err != nil {
			return errorf(ErrCorrupt, "%w", err)
		}
		return nil
	})
	if err != nil {
		return nil, corrupt(err)
	}
	return n, nil
}

// Save writes Adam's configuration, step count and moments to w as one
// checkpoint section (format above). Cost O(parameters), streamed.
func (a *Adam) Save(w io.Writer) error {
	if w == nil {
		return errorf(ErrConfig, "Save to a nil io.Writer")
	}
	a.syncMoments64() // Float32: the moments in their float64 form
	return checkpoint.Save(w, adamKind, ckVersion, func(w io.Writer) error {
		if err := checkpoint.WriteJSON(w, adamHeader{Config: a.cfg, Steps: a.t, Len: len(a.m)}); err != nil {
			return err
		}
		if err := checkpoint.WriteFloat64s(w, a.m); err != nil {
			return err
		}
		return checkpoint.WriteFloat64s(w, a.v)
	})
}

// LoadAdam reads an optimizer written by Adam.Save, restoring its
// configuration, step count and moments exactly; the next Step continues
// the saved run bit for bit. Errors are as for LoadNet; a NaN or infinite
// moment, or a negative second moment, is refused with an error wrapping
// ErrCorrupt that names it ("Adam second moment v[12] is NaN"), and
// ErrNonFinite as well for a NaN or an infinity. The header's length must
// be at most 2^28 and agree with the stored counts before the moments are
// read, and they are read as they arrive. Cost: O(parameters) time, about
// 3 × 16 bytes per parameter at the peak.
func LoadAdam(r io.Reader) (*Adam, error) {
	if r == nil {
		return nil, errorf(ErrConfig, "LoadAdam from a nil io.Reader")
	}
	var a *Adam
	err := checkpoint.Load(r, adamKind, ckVersion, func(_ uint32, r io.Reader) error {
		var h adamHeader
		if err := checkpoint.ReadJSON(r, &h, maxHeader); err != nil {
			return err
		}
		if h.Len <= 0 || h.Len > maxParams {
			return errorf(ErrCorrupt, "Adam header says %d parameters (must be in [1, %d])", h.Len, maxParams)
		}
		m, err := readValues(r, h.Len, "first moments", "the Adam header says")
		if err != nil {
			return err
		}
		v, err := readValues(r, h.Len, "second moments", "the Adam header says")
		if err != nil {
			return err
		}
		if a, err = NewAdam(h.Len, h.Config); err != nil {
			return errorf(ErrCorrupt, "Adam config: %w", err)
		}
		if a.cfg != h.Config {
			return errorf(ErrCorrupt, "Adam config %+v is not in its saved (validated) form", h.Config)
		}
		a.t = h.Steps
		copy(a.m, m)
		copy(a.v, v)
		a.syncMoments32()
		if i := firstNonFinite(a.m); i >= 0 {
			return errorf(ErrCorrupt, "%w", &NonFiniteError{What: "Adam first moment m", Index: i, Value: a.m[i]})
		}
		for i, v := range a.v {
			switch {
			case math.IsNaN(v) || math.IsInf(v, 0):
				return errorf(ErrCorrupt, "%w", &NonFiniteError{What: "Adam second moment v", Index: i, Value: v})
			case v < 0:
				return errorf(ErrCorrupt, "Adam second moment v[%d] is %g (must be >= 0)", i, v)
			}
		}
		return nil
	})
	if err != nil {
		return nil, corrupt(err)
	}
	return a, nil
}

// readValues reads a vector of want float64 values (checkpoint.WriteFloat64s),
// refusing another stored count with an error naming what and why before
// anything is allocated.
func readValues(r io.Reader, want int, what, why string) ([]float64, error) {
	vals, err := checkpoint.ReadFloat64s(r, want)
	if err != nil && errors.Is(err, checkpoint.ErrCorrupt) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, errorf(ErrCorrupt, "%s: %w (%s %d)", what, err, why, want)
	}
	return vals, err
}

// corrupt wraps ErrCorrupt around an error about the data (a damaged,
// truncated, unsupported or legacy section); a failure of the reader
// itself, and errors that already wrap ErrCorrupt, are returned as they
// are.
func corrupt(err error) error {
	if errors.Is(err, ErrCorrupt) || !(errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, checkpoint.ErrFormat)) {
		return err
	}
	return errorf(ErrCorrupt, "%w", err)
}
