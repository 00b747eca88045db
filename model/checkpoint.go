package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"math"
)

// Checkpoint format, version 1 (the same framing for a Net and an Adam).
// All integers are little endian.
//
//	magic    8 bytes: "APEXNET1" for a Net, "APEXADAM" for an Adam
//	version  uint32 (1)
//	hdrLen   uint32: length of the JSON header (at most 1 MiB)
//	count    uint64: number of float64 values after the header
//	header   hdrLen bytes of JSON: netHeader or adamHeader
//	values   count IEEE-754 float64 bit patterns
//	crc      uint32 CRC-32C (Castagnoli) of every byte before it
//
// A Net stores its Config and its parameters; an Adam its hyper-parameters,
// its step count and its moments m then v. Nothing is decoded before the
// checksum has matched, and the header must then agree with count.
const (
	netMagic    = "APEXNET1"
	adamMagic   = "APEXADAM"
	ckVersion   = 1
	ckFixed     = 24
	maxHeader   = 1 << 20
	readChunk   = 1 << 20 // Load's allocation step: memory grows only as data arrives
	maxCkValues = 2 * maxParams
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type netHeader struct {
	Config Config `json:"config"`
}

type adamHeader struct {
	Config AdamConfig `json:"config"`
	Steps  uint64     `json:"steps"`
	Len    int        `json:"len"`
}

// Save writes n's configuration and parameters to w in the versioned,
// checksummed format above (Clone semantics on LoadNet: buffers and
// gradients are not stored). Cost O(parameters); it builds the checkpoint
// in memory (8 bytes per parameter) and writes it with one Write.
func (n *Net) Save(w io.Writer) error {
	if w == nil {
		return errorf(ErrConfig, "Save to a nil io.Writer")
	}
	return writeCheckpoint(w, netMagic, netHeader{Config: n.cfg}, n.params)
}

// LoadNet reads a network written by Net.Save. It reads exactly the
// checkpoint's bytes from r (it does not buffer ahead), so other data may
// follow. An empty, truncated or damaged stream, a wrong magic or version,
// a bad checksum or a header that does not match the data is an error
// wrapping ErrCorrupt (and io.ErrUnexpectedEOF when truncated) that says
// which.
//
// A NaN or infinite parameter is refused too: the error wraps ErrCorrupt
// and a *NonFiniteError (ErrNonFinite) naming the first one and its place
// in the network, for example "params[12] (layer 0 W[3,0]) is NaN". Save
// still writes such a network (a failed run's diagnostic checkpoint);
// inspect one with a reader of the format above, not by loading it.
//
// Memory: the stored values are read in steps of 1 MiB as they arrive, so
// a length field cannot make LoadNet allocate more than about twice what
// the stream holds; the header's Config is validated (at most 1024 layers
// per list and 2^28 parameters) and its parameter count, computed without
// allocating, must equal the stored count before the network is built.
// Cost: O(parameters) time; about 3 × 8 bytes per parameter at the peak
// (the bytes read, the parameters and their gradients).
func LoadNet(r io.Reader) (*Net, error) {
	if r == nil {
		return nil, errorf(ErrConfig, "LoadNet from a nil io.Reader")
	}
	var h netHeader
	raw, err := readCheckpoint(r, netMagic, &h)
	if err != nil {
		return nil, err
	}
	cfg, err := h.Config.Validate()
	if err != nil {
		return nil, errorf(ErrCorrupt, "network config: %w", err)
	}
	if np, stored := cfg.numParams(), len(raw)/8; np != stored {
		return nil, errorf(ErrCorrupt, "%d parameters stored, the config needs %d", stored, np)
	}
	n, err := NewNet(cfg, nil)
	if err != nil {
		return nil, errorf(ErrCorrupt, "network config: %w", err)
	}
	decodeFloats(n.params, raw)
	if err := n.CheckFinite(); err != nil {
		return nil, errorf(ErrCorrupt, "%w", err)
	}
	return n, nil
}

// Save writes Adam's configuration, step count and moments to w (format
// above). Cost O(parameters); builds the checkpoint in memory.
func (a *Adam) Save(w io.Writer) error {
	if w == nil {
		return errorf(ErrConfig, "Save to a nil io.Writer")
	}
	return writeCheckpoint(w, adamMagic, adamHeader{Config: a.cfg, Steps: a.t, Len: len(a.m)}, a.m, a.v)
}

// LoadAdam reads an optimizer written by Adam.Save, restoring its
// configuration, step count and moments exactly; the next Step continues
// the saved run bit for bit. Errors are as for LoadNet; a NaN or infinite
// moment, or a negative second moment, is refused with an error wrapping
// ErrCorrupt that names it ("Adam second moment v[12] is NaN"), and
// ErrNonFinite as well for a NaN or an infinity. The header's length must
// agree with the stored count before the moments are allocated. Cost:
// O(parameters) time, about 3 × 16 bytes per parameter at the peak.
func LoadAdam(r io.Reader) (*Adam, error) {
	if r == nil {
		return nil, errorf(ErrConfig, "LoadAdam from a nil io.Reader")
	}
	var h adamHeader
	raw, err := readCheckpoint(r, adamMagic, &h)
	if err != nil {
		return nil, err
	}
	if count := len(raw) / 8; h.Len <= 0 || h.Len > maxParams || 2*h.Len != count {
		return nil, errorf(ErrCorrupt, "Adam header says %d parameters, %d values stored", h.Len, count)
	}
	a, err := NewAdam(h.Len, h.Config)
	if err != nil {
		return nil, errorf(ErrCorrupt, "Adam config: %w", err)
	}
	if a.cfg != h.Config {
		return nil, errorf(ErrCorrupt, "Adam config %+v is not in its saved (validated) form", h.Config)
	}
	a.t = h.Steps
	decodeFloats(a.m, raw[:8*h.Len])
	decodeFloats(a.v, raw[8*h.Len:])
	if i := firstNonFinite(a.m); i >= 0 {
		return nil, errorf(ErrCorrupt, "%w", &NonFiniteError{What: "Adam first moment m", Index: i, Value: a.m[i]})
	}
	for i, v := range a.v {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			return nil, errorf(ErrCorrupt, "%w", &NonFiniteError{What: "Adam second moment v", Index: i, Value: v})
		case v < 0:
			return nil, errorf(ErrCorrupt, "Adam second moment v[%d] is %g (must be >= 0)", i, v)
		}
	}
	return a, nil
}

func writeCheckpoint(w io.Writer, magic string, header any, vecs ...[]float64) error {
	js, err := json.Marshal(header)
	if err != nil {
		return errorf(ErrConfig, "Save: %w", err)
	}
	count := 0
	for _, v := range vecs {
		count += len(v)
	}
	buf := make([]byte, 0, ckFixed+len(js)+8*count+4)
	buf = append(buf, magic...)
	buf = binary.LittleEndian.AppendUint32(buf, ckVersion)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(js)))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(count))
	buf = append(buf, js...)
	for _, v := range vecs {
		for _, x := range v {
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(x))
		}
	}
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
	if _, err := w.Write(buf); err != nil {
		return err
	}
	return nil
}

// readCheckpoint reads one checkpoint of the given magic from r, checks it
// and decodes its header into header (unknown fields refused). It returns
// the stored values undecoded: count little-endian float64 bit patterns,
// 8 bytes each. The lengths in the fixed part are bounded (header at most
// maxHeader, count at most maxCkValues) and the bytes are read in steps of
// readChunk, so memory grows only as data arrives.
func readCheckpoint(r io.Reader, magic string, header any) ([]byte, error) {
	var fixed [ckFixed]byte
	if n, err := io.ReadFull(r, fixed[:]); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return nil, errorf(ErrCorrupt, "empty input")
		}
		return nil, truncated("header", err)
	}
	if got := string(fixed[:8]); got != magic {
		kind := map[string]string{netMagic: "a network", adamMagic: "an Adam optimizer"}
		if k, ok := kind[got]; ok {
			return nil, errorf(ErrCorrupt, "this is %s checkpoint, not %s", k, kind[magic])
		}
		return nil, errorf(ErrCorrupt, "bad magic %q (want %q)", got, magic)
	}
	if v := binary.LittleEndian.Uint32(fixed[8:]); v != ckVersion {
		return nil, errorf(ErrCorrupt, "unsupported format version %d (this build reads %d)", v, ckVersion)
	}
	hdrLen := binary.LittleEndian.Uint32(fixed[12:])
	count := binary.LittleEndian.Uint64(fixed[16:])
	if hdrLen == 0 || hdrLen > maxHeader {
		return nil, errorf(ErrCorrupt, "header length %d (must be in [1, %d])", hdrLen, maxHeader)
	}
	if count > maxCkValues {
		return nil, errorf(ErrCorrupt, "%d values (at most %d)", count, maxCkValues)
	}
	rest, err := readN(r, int(hdrLen)+8*int(count)+4)
	if err != nil {
		return nil, truncated("data", err)
	}
	body := rest[:len(rest)-4]
	crc := crc32.Update(crc32.Checksum(fixed[:], castagnoli), castagnoli, body)
	if want := binary.LittleEndian.Uint32(rest[len(rest)-4:]); crc != want {
		return nil, errorf(ErrCorrupt, "checksum mismatch (stored %08x, computed %08x)", want, crc)
	}
	dec := json.NewDecoder(bytes.NewReader(body[:hdrLen]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(header); err != nil {
		return nil, errorf(ErrCorrupt, "header: %w", err)
	}
	if dec.More() {
		return nil, errorf(ErrCorrupt, "header: data after the JSON object")
	}
	return body[hdrLen:], nil
}

// decodeFloats sets dst[i] to the float64 whose little-endian bits are
// raw[8i:8i+8]; len(raw) must be 8*len(dst).
func decodeFloats(dst []float64, raw []byte) {
	for i := range dst {
		dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
	}
}

// readN reads exactly n bytes, allocating in steps of readChunk so that a
// damaged length cannot make it allocate more than the stream holds.
func readN(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, 0, min(n, readChunk))
	for len(buf) < n {
		k := min(n-len(buf), readChunk)
		if cap(buf)-len(buf) < k {
			nb := make([]byte, len(buf), min(n, 2*cap(buf)+k))
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+k])
		buf = buf[:len(buf)+m]
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

func truncated(what string, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errorf(ErrCorrupt, "truncated in the %s: %w", what, err)
	}
	return err // a reader's own error (a failing disk), not the data's fault
}
