package sampler

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
)

// Stateful is implemented by a stage whose state lives neither in the
// buffer nor in the learner step (NERS's scorer and per-slot features):
// the runtime's checkpoint saves it with the buffer, and a resumed run
// loads it into the stage it rebuilt from the same configuration.
type Stateful interface {
	Save(w io.Writer) error
	Load(r io.Reader) error
}

var _ Stateful = (*NERS)(nil)

// NERS checkpoint layout (little endian): magic "APEXNERS", version
// uint32, then a uint64 length and that many bytes of gob (nersState),
// then CRC-32C of those bytes, then the scorer (NERSNet.Save).
const (
	nersMagic   = "APEXNERS"
	nersVersion = 1
)

// nersState is everything of a NERS but its scorer and configuration.
type nersState struct {
	Width, Capacity   int
	Steps, LastUpdate int64
	Baseline          float64
	HasBase           bool
	Pending           float64
	HasPend           bool
	Seen              int64
	Hist              []buffer.Ref
	MomN              float64
	MomMean, MomM2    []float64
	TD, Q, Y          []float32
	Gen               []uint32
	RNG               []byte
	Stats             NERSStats
}

// checkScalars refuses the scalar fields of a saved state no stage could
// hold: a NaN or infinite baseline, pending evaluation or stat (each
// stat's source is checked finite before it is recorded), negative
// counts. It names the field. O(1).
func (st *nersState) checkScalars() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"baseline", st.Baseline}, {"pending evaluation", st.Pending},
		{"stats.reward", st.Stats.Reward}, {"stats.loss", st.Stats.Loss},
		{"stats.score_min", st.Stats.ScoreMin}, {"stats.score_max", st.Stats.ScoreMax}, {"stats.score_mean", st.Stats.ScoreMean},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s is %v (must be finite)", f.name, f.v)
		}
	}
	if st.Stats.TrainRows < 0 {
		return fmt.Errorf("stats.train_rows is %d (must be >= 0)", st.Stats.TrainRows)
	}
	return nil
}

// Save writes the stage's state: the scorer and its optimizer, the
// per-slot features, the running moments, the history reservoir, the
// evaluation baseline and any pending evaluation, the step counters, the
// random stream and the stats. It needs quiescence (no concurrent
// Sample or UpdateFeatures). Cost: O(Capacity + History + the scorer).
func (s *NERS) Save(w io.Writer) error {
	if w == nil {
		return fmt.Errorf("%w: ners: Save to a nil io.Writer", buffer.ErrNil)
	}
	rngState, err := s.pcg.MarshalBinary()
	if err != nil {
		return fmt.Errorf("ners: save: %w", err)
	}
	s.mu.Lock()
	pend, hasPend := s.pending, s.hasPend
	s.mu.Unlock()
	st := nersState{Width: s.width, Capacity: len(s.gen), Steps: s.steps, LastUpdate: s.lastUpdate, Baseline: s.baseline,
		HasBase: s.hasBase, Pending: pend, HasPend: hasPend, Seen: s.seen, Hist: s.hist[:s.histN], MomN: s.momN,
		MomMean: s.momMean, MomM2: s.momM2, TD: s.td, Q: s.q, Y: s.y, Gen: s.gen, RNG: rngState, Stats: s.Stats()}
	var g bytes.Buffer
	if err := gob.NewEncoder(&g).Encode(&st); err != nil {
		return fmt.Errorf("ners: save: %w", err)
	}
	var hdr [20]byte
	copy(hdr[:8], nersMagic)
	binary.LittleEndian.PutUint32(hdr[8:], nersVersion)
	binary.LittleEndian.PutUint64(hdr[12:], uint64(g.Len()))
	var crc [4]byte
	binary.LittleEndian.PutUint32(crc[:], crc32.Checksum(g.Bytes(), crc32.MakeTable(crc32.Castagnoli)))
	for _, part := range [][]byte{hdr[:], g.Bytes(), crc[:]} {
		if _, err := w.Write(part); err != nil {
			return fmt.Errorf("ners: save: %w", err)
		}
	}
	return s.net.Save(w)
}

// Load restores what Save wrote into s, a stage built over a buffer of
// the same capacity with the same configuration; the run then continues
// as if never stopped. A damaged stream, or a state that breaks the
// stage's invariants, is an error wrapping buffer.ErrCorrupt that names
// the field (non-finite per-slot reports, moments, baseline or stats
// included; a damaged scorer also wraps model.ErrCorrupt, and a NaN or
// infinite scorer parameter or Adam moment model.ErrNonFinite); one
// written for another buffer, feature width or a larger History wraps
// buffer.ErrConfig; either way s is unchanged. It needs quiescence.
//
// Memory: the state's length field is bounded by what a stage of s's
// size can hold (about 48 bytes a slot) and the bytes are read as they
// arrive, so a short stream cannot make Load allocate much more than it
// supplies; the scorer is bounded as model.LoadNet bounds it. Cost:
// O(Capacity + History + the scorer).
func (s *NERS) Load(r io.Reader) error {
	if r == nil {
		return fmt.Errorf("%w: ners: Load from a nil io.Reader", buffer.ErrNil)
	}
	var hdr [20]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return fmt.Errorf("%w: ners: truncated header: %v", buffer.ErrCorrupt, err)
	}
	if string(hdr[:8]) != nersMagic {
		return fmt.Errorf("%w: ners: not a NERS checkpoint (bad magic)", buffer.ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint32(hdr[8:]); v != nersVersion {
		return fmt.Errorf("%w: ners: version %d, this build reads %d", buffer.ErrCorrupt, v, nersVersion)
	}
	n := binary.LittleEndian.Uint64(hdr[12:])
	// The state's size is bounded by this stage's: its per-slot arrays
	// (16 bytes a slot in memory, at most 32 in gob), history (8 bytes a
	// ref, at most 12) and moments, plus gob's
	// overhead. A larger length field is damage, refused before any
	// allocation.
	if limit := uint64(48*len(s.gen) + 24*len(s.hist) + 32*s.width + 1<<16); n > limit {
		return fmt.Errorf("%w: ners: state of %d bytes, more than a stage of %d slots can hold (%d)", buffer.ErrCorrupt, n, len(s.gen), limit)
	}
	// Read through a LimitReader (ReadAll grows as data arrives): the
	// length field cannot make Load allocate more than the stream holds.
	data, err := io.ReadAll(io.LimitReader(r, int64(n)+4))
	if err != nil {
		return fmt.Errorf("ners: reading the state: %w", err) // the reader's own failure, not the data's
	}
	if uint64(len(data)) < n+4 {
		return fmt.Errorf("%w: ners: truncated state: %d of %d bytes: %w", buffer.ErrCorrupt, len(data), n+4, io.ErrUnexpectedEOF)
	}
	if binary.LittleEndian.Uint32(data[n:]) != crc32.Checksum(data[:n], crc32.MakeTable(crc32.Castagnoli)) {
		return fmt.Errorf("%w: ners: state checksum mismatch", buffer.ErrCorrupt)
	}
	var st nersState
	if err := gob.NewDecoder(bytes.NewReader(data[:n])).Decode(&st); err != nil {
		return fmt.Errorf("%w: ners: state: %v", buffer.ErrCorrupt, err)
	}
	c := len(s.gen)
	switch {
	case st.Width != s.width || st.Capacity != c:
		return fmt.Errorf("%w: ners: saved for %d-wide features over %d slots, this stage has %d and %d", buffer.ErrConfig, st.Width, st.Capacity, s.width, c)
	case len(st.Hist) > len(s.hist):
		return fmt.Errorf("%w: ners: saved history of %d refs, this stage's History is %d", buffer.ErrConfig, len(st.Hist), len(s.hist))
	case len(st.TD) != c || len(st.Q) != c || len(st.Y) != c || len(st.Gen) != c || len(st.MomMean) != s.width || len(st.MomM2) != s.width:
		return fmt.Errorf("%w: ners: state arrays of the wrong length", buffer.ErrCorrupt)
	}
	// The decoded state must satisfy the stage's invariants before any of
	// it is taken.
	probe := &NERS{bcfg: s.bcfg, width: s.width, td: st.TD, q: st.Q, y: st.Y, gen: st.Gen,
		hist: make([]buffer.Ref, len(s.hist)), histN: len(st.Hist), seen: st.Seen, steps: st.Steps, lastUpdate: st.LastUpdate,
		momN: st.MomN, momMean: st.MomMean, momM2: st.MomM2}
	copy(probe.hist, st.Hist)
	if err := probe.check(); err != nil {
		return fmt.Errorf("%w: ners: saved state: %v", buffer.ErrCorrupt, err)
	}
	if err := st.checkScalars(); err != nil {
		return fmt.Errorf("%w: ners: saved state: %w", buffer.ErrCorrupt, err)
	}
	pcg := &rand.PCG{}
	if err := pcg.UnmarshalBinary(st.RNG); err != nil {
		return fmt.Errorf("%w: ners: random stream: %v", buffer.ErrCorrupt, err)
	}
	if err := s.net.Load(r); err != nil {
		if errors.Is(err, buffer.ErrConfig) {
			return fmt.Errorf("ners: %w", err)
		}
		return fmt.Errorf("%w: ners: %w", buffer.ErrCorrupt, err)
	}
	*s.pcg = *pcg
	s.steps, s.lastUpdate, s.baseline, s.hasBase, s.seen = st.Steps, st.LastUpdate, st.Baseline, st.HasBase, st.Seen
	s.histN = copy(s.hist, st.Hist)
	s.momN = st.MomN
	copy(s.momMean, st.MomMean)
	copy(s.momM2, st.MomM2)
	copy(s.td, st.TD)
	copy(s.q, st.Q)
	copy(s.y, st.Y)
	copy(s.gen, st.Gen)
	s.last = nil
	s.mu.Lock()
	s.pending, s.hasPend = st.Pending, st.HasPend
	s.mu.Unlock()
	s.statMu.Lock()
	s.stats = st.Stats
	s.statMu.Unlock()
	return nil
}
