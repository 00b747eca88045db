package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Writer writes one section's payload to an underlying io.Writer, in
// chunks of ChunkSize bytes (the last one shorter). It is created by NewWriter, which
// writes the head, and finished by Close, which writes the last chunk and
// the end marker. Memory: the pending chunk, grown as needed up to
// ChunkSize (whole chunks of a large Write are written from the caller's
// slice). The first error sticks: every later call returns it. A Writer is
// used by one goroutine at a time.
type Writer struct {
	w      io.Writer
	buf    []byte // the pending chunk: 4 bytes of length, then payload
	crc    uint32 // running CRC-32C of the payload, seeded with the head's
	total  uint64
	err    error
	closed bool
}

// NewWriter writes a section head of the given kind and version to w and
// returns the Writer of its payload. The kind must be 1 to MaxKind letters,
// digits or ". _ - /", and the version positive (an error otherwise).
func NewWriter(w io.Writer, kind string, version uint32) (*Writer, error) {
	if w == nil {
		return nil, errors.New("checkpoint: NewWriter on a nil io.Writer")
	}
	if err := checkKind(kind); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if version == 0 {
		return nil, fmt.Errorf("checkpoint: kind %s: version 0 (versions start at 1)", kind)
	}
	head := make([]byte, 0, headFixed+len(kind)+4)
	head = append(head, Magic...)
	head = binary.LittleEndian.AppendUint32(head, version)
	head = append(head, byte(len(kind)))
	head = append(head, kind...)
	crc := crc32.Checksum(head, castagnoli)
	head = binary.LittleEndian.AppendUint32(head, crc)
	if _, err := w.Write(head); err != nil {
		return nil, err
	}
	return &Writer{w: w, crc: crc, buf: make([]byte, 4, 4+512)}, nil
}

// Write appends p to the payload. Every chunk but the last holds exactly
// ChunkSize bytes, so the framing of a payload does not depend on how it
// was split into writes; whole chunks of a large Write are written straight
// from p, without a copy, and the rest is gathered into the pending chunk.
// Cost: O(len(p)) (a CRC-32C, and a copy of what is gathered).
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		w.err = errors.New("checkpoint: Write after Close")
		return 0, w.err
	}
	n := 0
	for len(p) > 0 {
		pending := len(w.buf) - 4
		if pending == 0 && len(p) >= ChunkSize {
			if err := w.writeChunk(p[:ChunkSize]); err != nil {
				return n, err
			}
			p, n = p[ChunkSize:], n+ChunkSize
			continue
		}
		k := min(len(p), ChunkSize-pending)
		if need := len(w.buf) + k + 4; need > cap(w.buf) { // room for the checksum too
			g := make([]byte, len(w.buf), min(8+ChunkSize, max(2*cap(w.buf), need)))
			copy(g, w.buf)
			w.buf = g
		}
		w.buf = append(w.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(w.buf)-4 == ChunkSize {
			if err := w.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// writeChunk writes data (1 to ChunkSize bytes) as a chunk of its own;
// nothing may be pending.
func (w *Writer) writeChunk(data []byte) error {
	var n, sum [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(data)))
	w.crc = crc32.Update(w.crc, castagnoli, data)
	w.total += uint64(len(data))
	binary.LittleEndian.PutUint32(sum[:], w.crc)
	for _, b := range [][]byte{n[:], data, sum[:]} {
		if _, err := w.w.Write(b); err != nil {
			w.err = err
			return err
		}
	}
	return nil
}

// flush writes the pending chunk, if any.
func (w *Writer) flush() error {
	data := w.buf[4:]
	if len(data) == 0 {
		return nil
	}
	binary.LittleEndian.PutUint32(w.buf, uint32(len(data)))
	w.crc = crc32.Update(w.crc, castagnoli, data)
	w.total += uint64(len(data))
	w.buf = binary.LittleEndian.AppendUint32(w.buf, w.crc)
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = err
		return err
	}
	w.buf = w.buf[:4]
	return nil
}

// Close writes the pending chunk and the end marker. It does not close the
// underlying writer. Closing twice is an error.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("checkpoint: Close of a closed Writer")
	}
	w.closed = true
	if err := w.flush(); err != nil {
		return err
	}
	var end [16]byte
	binary.LittleEndian.PutUint64(end[4:], w.total)
	binary.LittleEndian.PutUint32(end[12:], crc32.Update(w.crc, castagnoli, end[4:12]))
	if _, err := w.w.Write(end[:]); err != nil {
		w.err = err
		return err
	}
	return nil
}

// Save writes one section of the given kind and version to w, whose payload
// is what save writes to the io.Writer it is given (save must not keep it).
// An error of save is returned as is; on error w may hold a partial
// section. Cost: the payload's size, with at most one chunk (ChunkSize) in
// memory.
func Save(w io.Writer, kind string, version uint32, save func(io.Writer) error) error {
	sw, err := NewWriter(w, kind, version)
	if err != nil {
		return err
	}
	if err := save(sw); err != nil {
		return err
	}
	if sw.err != nil { // save swallowed a write error
		return sw.err
	}
	return sw.Close()
}
