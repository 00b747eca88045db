package sampler

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/checkpoint"
	"github.com/apexrl/apex/model"
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

// NERS checkpoint: one section of the checkpoint package's format, kind
// sampler.NERS, version 1, whose payload is a uint64 length and that many
// bytes of gob (nersState), then the scorer (NERSNet.Save: its networks'
// and optimizers' own sections). A file of the earlier format (magic
// APEXNERS) is refused with an error that names it.
const (
	nersKind    = "sampler.NERS"
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
	err = checkpoint.Save(w, nersKind, nersVersion, func(w io.Writer) error {
		if _, err := w.Write(binary.LittleEndian.AppendUint64(nil, uint64(g.Len()))); err != nil {
			return err
		}
		if _, err := w.Write(g.Bytes()); err != nil {
			return err
		}
		return s.net.Save(w)
	})
	if err != nil {
		return fmt.Errorf("ners: save: %w", err)
	}
	return nil
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
	var st nersState
	var pcg *rand.PCG
	var commitNet func()
	err := checkpoint.Load(r, nersKind, nersVersion, func(_ uint32, r io.Reader) error {
		var err error
		if st, pcg, err = s.readState(r); err != nil {
			return err
		}
		// The scorer is committed with the rest, once the whole section
		// has been read and checked, so that on any error s is unchanged.
		commitNet, err = s.net.load(r)
		return err
	})
	if err != nil {
		switch {
		case errors.Is(err, buffer.ErrConfig), errors.Is(err, buffer.ErrCorrupt):
			return err
		case errors.Is(err, checkpoint.ErrCorrupt), errors.Is(err, checkpoint.ErrFormat), errors.Is(err, model.ErrCorrupt):
			return fmt.Errorf("%w: ners: %w", buffer.ErrCorrupt, err)
		}
		return fmt.Errorf("ners: reading the checkpoint: %w", err)
	}
	commitNet()
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

// readState reads and checks the gob state Save wrote (everything of the
// stage but its scorer) for s, and its random stream. Errors wrap
// buffer.ErrCorrupt or, for a state written for another stage,
// buffer.ErrConfig.
func (s *NERS) readState(r io.Reader) (nersState, *rand.PCG, error) {
	var st nersState
	var nb [8]byte
	if _, err := io.ReadFull(r, nb[:]); err != nil {
		return st, nil, fmt.Errorf("%w: ners: truncated state length: %w", buffer.ErrCorrupt, err)
	}
	n := binary.LittleEndian.Uint64(nb[:])
	// The state's size is bounded by this stage's: its per-slot arrays
	// (16 bytes a slot in memory, at most 32 in gob), history (8 bytes a
	// ref, at most 12) and moments, plus gob's overhead. A larger length
	// field is damage, refused before any allocation.
	if limit := uint64(48*len(s.gen) + 24*len(s.hist) + 32*s.width + 1<<16); n > limit {
		return st, nil, fmt.Errorf("%w: ners: state of %d bytes, more than a stage of %d slots can hold (%d)", buffer.ErrCorrupt, n, len(s.gen), limit)
	}
	// Read through a LimitReader (ReadAll grows as data arrives): the
	// length field cannot make Load allocate more than the stream holds.
	data, err := io.ReadAll(io.LimitReader(r, int64(n)))
	if err != nil {
		return st, nil, err
	}
	if uint64(len(data)) < n {
		return st, nil, fmt.Errorf("%w: ners: truncated state: %d of %d bytes: %w", buffer.ErrCorrupt, len(data), n, io.ErrUnexpectedEOF)
	}
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&st); err != nil {
		return st, nil, fmt.Errorf("%w: ners: state: %v", buffer.ErrCorrupt, err)
	}
	c := len(s.gen)
	switch {
	case st.Width != s.width || st.Capacity != c:
		return st, nil, fmt.Errorf("%w: ners: saved for %d-wide features over %d slots, this stage has %d and %d", buffer.ErrConfig, st.Width, st.Capacity, s.width, c)
	case len(st.Hist) > len(s.hist):
		return st, nil, fmt.Errorf("%w: ners: saved history of %d refs, this stage's History is %d", buffer.ErrConfig, len(st.Hist), len(s.hist))
	case len(st.TD) != c || len(st.Q) != c || len(st.Y) != c || len(st.Gen) != c || len(st.MomMean) != s.width || len(st.MomM2) != s.width:
		return st, nil, fmt.Errorf("%w: ners: state arrays of the wrong length", buffer.ErrCorrupt)
	}
	// The decoded state must satisfy the stage's invariants before any of
	// it is taken.
	probe := &NERS{bcfg: s.bcfg, width: s.width, td: st.TD, q: st.Q, y: st.Y, gen: st.Gen,
		hist: make([]buffer.Ref, len(s.hist)), histN: len(st.Hist), seen: st.Seen, steps: st.Steps, lastUpdate: st.LastUpdate,
		momN: st.MomN, momMean: st.MomMean, momM2: st.MomM2}
	copy(probe.hist, st.Hist)
	if err := probe.check(); err != nil {
		return st, nil, fmt.Errorf("%w: ners: saved state: %v", buffer.ErrCorrupt, err)
	}
	if err := st.checkScalars(); err != nil {
		return st, nil, fmt.Errorf("%w: ners: saved state: %w", buffer.ErrCorrupt, err)
	}
	pcg := &rand.PCG{}
	if err := pcg.UnmarshalBinary(st.RNG); err != nil {
		return st, nil, fmt.Errorf("%w: ners: random stream: %v", buffer.ErrCorrupt, err)
	}
	return st, pcg, nil
}
