package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Reader reads sections from an underlying io.Reader: Next reads a
// section's head, Read its payload (io.EOF at the section's end, once the
// end marker's length and checksum have matched), Skip the rest of it.
// Every chunk's checksum is checked before any of its bytes are returned.
// A Reader reads exactly the sections' bytes from the underlying reader,
// never ahead, so other data may follow them (wrap a file in a
// bufio.Reader for speed). Memory: one chunk buffer, at most MaxChunk
// bytes, allocated at the size of the chunk read. Errors stick: every later
// call returns the first. A Reader is used by one goroutine at a time.
type Reader struct {
	r     io.Reader
	hdr   Header
	in    bool   // a head was read; Read reads its payload
	done  bool   // the section's end marker was read
	crc   uint32 // running CRC-32C of the payload, seeded with the head's
	total uint64 // payload bytes read so far
	chunk []byte // the current chunk's bytes not yet returned
	buf   []byte
	err   error
}

// NewReader returns a Reader of the sections in r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Header is the current section's header (zero before the first Next).
func (r *Reader) Header() Header { return r.hdr }

// readFull reads len(p) bytes of the current section; the end of the
// stream is a truncation.
func (r *Reader) readFull(p []byte, what string) error {
	if _, err := io.ReadFull(r.r, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return r.fail(fmt.Errorf("%w: %s: truncated in the %s: %w", ErrCorrupt, r.name(), what, io.ErrUnexpectedEOF))
		}
		return r.fail(fmt.Errorf("checkpoint: %s: reading the %s: %w", r.name(), what, err))
	}
	return nil
}

func (r *Reader) name() string {
	if r.hdr.Kind == "" {
		return "section"
	}
	return "section " + r.hdr.Kind
}

func (r *Reader) fail(err error) error {
	r.err = err
	return err
}

// Next skips what is left of the current section (checking it) and reads
// the next section's head. It returns io.EOF when the stream ends where a
// section could start, and an error wrapping ErrCorrupt for a damaged
// head, or ErrFormat (a *LegacyError) for a file in apex's earlier
// formats.
func (r *Reader) Next() (Header, error) {
	if r.err != nil {
		return Header{}, r.err
	}
	if r.in && !r.done {
		if err := r.Skip(); err != nil {
			return Header{}, err
		}
	}
	r.in, r.done, r.hdr, r.chunk, r.total = false, false, Header{}, nil, 0
	var head [headFixed + MaxKind + 4]byte
	if n, err := io.ReadFull(r.r, head[:len(Magic)]); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return Header{}, io.EOF // not sticky: nothing was consumed
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Header{}, r.fail(fmt.Errorf("%w: truncated in a section head: %w", ErrCorrupt, io.ErrUnexpectedEOF))
		}
		return Header{}, r.fail(fmt.Errorf("checkpoint: reading a section head: %w", err))
	}
	if m := string(head[:len(Magic)]); m != Magic {
		if what, ok := legacy[m]; ok {
			var v [4]byte
			if _, err := io.ReadFull(r.r, v[:]); err != nil {
				return Header{}, r.fail(fmt.Errorf("%w: %s (%s) truncated before its version", ErrCorrupt, m, what))
			}
			return Header{}, r.fail(&LegacyError{Magic: m, What: what, Version: binary.LittleEndian.Uint32(v[:])})
		}
		return Header{}, r.fail(fmt.Errorf("%w: bad magic %q (want %q): not an apex checkpoint section", ErrCorrupt, m, Magic))
	}
	if err := r.readFull(head[len(Magic):headFixed], "head"); err != nil {
		return Header{}, err
	}
	kl := int(head[headFixed-1])
	if kl == 0 || kl > MaxKind {
		return Header{}, r.fail(fmt.Errorf("%w: section kind of %d bytes (must be in [1, %d])", ErrCorrupt, kl, MaxKind))
	}
	if err := r.readFull(head[headFixed:headFixed+kl+4], "head"); err != nil {
		return Header{}, err
	}
	crc := crc32.Checksum(head[:headFixed+kl], castagnoli)
	if got := binary.LittleEndian.Uint32(head[headFixed+kl:]); got != crc {
		return Header{}, r.fail(fmt.Errorf("%w: section head checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, got, crc))
	}
	h := Header{Kind: string(head[headFixed : headFixed+kl]), Version: binary.LittleEndian.Uint32(head[len(Magic):])}
	if err := checkKind(h.Kind); err != nil {
		return Header{}, r.fail(fmt.Errorf("%w: %w", ErrCorrupt, err))
	}
	if h.Version == 0 {
		return Header{}, r.fail(fmt.Errorf("%w: section %s: version 0", ErrCorrupt, h.Kind))
	}
	r.hdr, r.in, r.crc = h, true, crc
	return h, nil
}

// check checks a chunk's data against its stored running checksum and
// counts it.
func (r *Reader) check(data, sum []byte) error {
	crc := crc32.Update(r.crc, castagnoli, data)
	if got := binary.LittleEndian.Uint32(sum); got != crc {
		return r.fail(fmt.Errorf("%w: %s: checksum mismatch in the chunk at payload byte %d (stored %08x, computed %08x)", ErrCorrupt, r.name(), r.total, got, crc))
	}
	r.crc, r.total = crc, r.total+uint64(len(data))
	return nil
}

// chunkHead reads a chunk's length and checks its bound, or reads and
// checks the end marker (then it returns 0 and sets r.done).
func (r *Reader) chunkHead() (uint32, error) {
	var n [4]byte
	if err := r.readFull(n[:], "chunk length"); err != nil {
		return 0, err
	}
	size := binary.LittleEndian.Uint32(n[:])
	if size == 0 {
		var end [12]byte
		if err := r.readFull(end[:], "end marker"); err != nil {
			return 0, err
		}
		total := binary.LittleEndian.Uint64(end[:8])
		if total != r.total {
			return 0, r.fail(fmt.Errorf("%w: %s: the end marker says %d payload bytes, the chunks held %d", ErrCorrupt, r.name(), total, r.total))
		}
		if got, want := binary.LittleEndian.Uint32(end[8:]), crc32.Update(r.crc, castagnoli, end[:8]); got != want {
			return 0, r.fail(fmt.Errorf("%w: %s: end checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, r.name(), got, want))
		}
		r.done = true
		return 0, nil
	}
	if size > MaxChunk {
		return 0, r.fail(fmt.Errorf("%w: %s: a chunk of %d bytes (at most %d)", ErrCorrupt, r.name(), size, MaxChunk))
	}
	return size, nil
}

// growStep is the first allocation of a chunk buffer larger than the
// last one: it then doubles as the chunk's bytes arrive.
const growStep = 64 << 10

// readChunk reads n bytes (a chunk and its checksum) into r.buf. A chunk
// larger than any before is read in steps, the buffer growing with the
// bytes that arrive, so a short stream cannot make it allocate much more
// than it holds (at most 2n, and n <= MaxChunk+4).
func (r *Reader) readChunk(n int) ([]byte, error) {
	if n <= cap(r.buf) {
		b := r.buf[:n]
		return b, r.readFull(b, "payload")
	}
	b := r.buf[:0]
	for len(b) < n {
		if len(b) == cap(b) {
			g := make([]byte, len(b), min(n, max(2*cap(b), growStep)))
			copy(g, b)
			b = g
		}
		k := cap(b) - len(b)
		if err := r.readFull(b[len(b):len(b)+k], "payload"); err != nil {
			return nil, err
		}
		b = b[:len(b)+k]
	}
	r.buf = b
	return b, nil
}

// Read reads the current section's payload. It returns io.EOF at the
// section's end, after the end marker has been checked.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if !r.in {
		return 0, errors.New("checkpoint: Read before Next")
	}
	for len(r.chunk) == 0 {
		if r.done {
			return 0, io.EOF
		}
		size, err := r.chunkHead()
		if err != nil {
			return 0, err
		}
		if size == 0 {
			continue
		}
		if int(size) <= len(p) {
			// A chunk that fits in p is read straight into it, without a
			// copy; its bytes count as returned only once they check.
			var sum [4]byte
			if err := r.readFull(p[:size], "payload"); err != nil {
				return 0, err
			}
			if err := r.readFull(sum[:], "payload"); err != nil {
				return 0, err
			}
			if err := r.check(p[:size], sum[:]); err != nil {
				return 0, err
			}
			return int(size), nil
		}
		b, err := r.readChunk(int(size) + 4)
		if err != nil {
			return 0, err
		}
		if err := r.check(b[:size], b[size:]); err != nil {
			return 0, err
		}
		r.chunk = b[:size]
	}
	n := copy(p, r.chunk)
	r.chunk = r.chunk[n:]
	return n, nil
}

// Skip reads and checks the rest of the current section's payload,
// discarding it, and reports how many bytes it skipped.
func (r *Reader) Skip() error {
	_, err := r.skip()
	return err
}

func (r *Reader) skip() (int64, error) {
	if r.err != nil {
		return 0, r.err
	}
	if !r.in {
		return 0, errors.New("checkpoint: Skip before Next")
	}
	return io.Copy(io.Discard, r)
}

// Finish checks that the current section's payload has been read to its
// end (its end marker included), reading what is left: an unread byte is
// an error wrapping ErrCorrupt naming how many there were.
func (r *Reader) Finish() error {
	n, err := r.skip()
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%w: %s: %d payload bytes after its state", ErrCorrupt, r.name(), n)
	}
	return nil
}

// Open reads the next section's head from r and checks that it is of the
// given kind and of a version in [1, version]: a section of another kind
// or a newer version is an error wrapping ErrFormat, an empty stream one
// wrapping ErrCorrupt and io.ErrUnexpectedEOF.
func (r *Reader) Open(kind string, version uint32) (Header, error) {
	h, err := r.Next()
	switch {
	case errors.Is(err, io.EOF):
		return h, fmt.Errorf("%w: empty input, want a %s section: %w", ErrCorrupt, kind, io.ErrUnexpectedEOF)
	case err != nil:
		return h, err
	case h.Kind != kind:
		return h, fmt.Errorf("%w: a %s section, want %s", ErrFormat, h, kind)
	case h.Version > version:
		return h, fmt.Errorf("%w: %s, this build reads %s up to version %d (written by a newer apex?)", ErrFormat, h, kind, version)
	}
	return h, nil
}

// Load reads one section of the given kind from r: it checks the head as
// Reader.Open does, runs load over the payload (with the version found,
// at most version), and checks that load read the payload to its end. It
// reads exactly the section's bytes from r. An error of load is returned
// as is. Memory: one chunk (at most MaxChunk) plus what load keeps.
func Load(r io.Reader, kind string, version uint32, load func(version uint32, r io.Reader) error) error {
	if r == nil {
		return errors.New("checkpoint: Load from a nil io.Reader")
	}
	cr := NewReader(r)
	h, err := cr.Open(kind, version)
	if err != nil {
		return err
	}
	if err := load(h.Version, cr); err != nil {
		return err
	}
	return cr.Finish()
}
