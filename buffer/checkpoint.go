package buffer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strings"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/apexrl/apex/checkpoint"
)

// Checkpoint format: one section of the checkpoint package's format
// (magic, kind, version, chunked payload, CRC-32C), kind "buffer",
// version 1, whose payload is:
//
// All integers are little endian; every padding byte is zero.
//
//	config   cfgLen uint32 (at most maxConfigBytes), then cfgLen bytes of
//	         JSON (ckConfig), zero-padded to a multiple of 8
//	sections, each:
//	         id        uint32 (ckID* below, in this order)
//	         elemBytes uint32 (4 or 8)
//	         count     uint64 (number of values, fixed by the config)
//	         data      count*elemBytes bytes, zero-padded to 8
//	  counters  uint64 ×9: samples, updates, stale updates, stale reads,
//	            torn reads, clamped, next stripe, running max priority (units),
//	            stratum fallbacks
//	  stripes   uint64 ×3 per stripe: cursor, written, inserts
//	  leaves    uint64 per slot, in global slot order: gen<<40 | units
//	  columns   obs, next_obs, action | action_vec, reward, discount, flags,
//	            then the optional columns the config enables (episode_id,
//	            episode_step, global_step, actor_id, state_hash,
//	            next_state_hash, each Floats column in order)
//
// The config is stored validated (defaults filled in) and in the exact
// encoding Save produces; anything else is refused, so a checkpoint that
// loads re-saves to identical bytes. Internal sum-tree and min-tree nodes
// are not stored: Load rebuilds them from the leaves exactly (fixed-point
// sums). A file of the earlier format (magic APEXREPL) is refused with an
// error that names it.
//
// Version 2 (SaveStriped, written while the buffer is in use) holds the
// same data grouped by stripe, in stripe order, so that each stripe can
// be copied and written on its own (snapshot.go says what consistency
// that gives):
//
//	config   as in version 1
//	per stripe s, in order:
//	  stripe    uint64 ×3: cursor, written, inserts (cursor = written)
//	  leaves    uint64 per slot of the stripe, in slot order
//	  columns   as in version 1, each a section of the stripe's slots only
//	counters  uint64 ×9 as in version 1, read after the last stripe
//
// Stripe s's slots are global slots [stripeOffset(s), +stripeCap(s)), so
// the stripes' leaves and columns, concatenated, are version 1's. Load
// checks a version 2 checkpoint exactly as a version 1 one.

const (
	ckKind    = "buffer"
	ckVersion = 1
	// ckVersionStriped is SaveStriped's format (see below); Load reads
	// both.
	ckVersionStriped = 2

	// maxConfigBytes bounds the JSON config of a checkpoint.
	maxConfigBytes = 1 << 20
	// maxCheckpointBytes bounds the data a config may declare: no section
	// and no checkpoint may need more (a config beyond it is refused before
	// anything is allocated).
	maxCheckpointBytes = 1 << 47
	// ckChunk is the allocation step of Load when the stream's length is not
	// known: memory then grows only as data actually arrives.
	ckChunk = 1 << 20

	ckSectionHeader = 16
	ckNumCounters   = 9
)

// Section ids.
const (
	ckIDCounters uint32 = 1 + iota
	ckIDStripes
	ckIDLeaves
	ckIDStripe // version 2: one stripe's cursor, written, inserts
)

const (
	ckIDObs uint32 = 16 + iota
	ckIDNextObs
	ckIDAction
	ckIDActionVec
	ckIDReward
	ckIDDiscount
	ckIDFlags
	ckIDEpisodeID
	ckIDEpisodeStep
	ckIDGlobalStep
	ckIDActorID
	ckIDStateHash
	ckIDNextStateHash
	// ckIDFloats+i is Config.Floats[i].
	ckIDFloats uint32 = 0x100
)

// nativeLittleEndian selects the bulk (memory view) encoding of columns;
// other machines convert value by value.
var nativeLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// Save writes a checkpoint of b to w: the config, every counter, every
// slot's generation and priority and every stored column (format above).
// Load restores it exactly: the same Refs stay valid, the same seed samples
// the same items. On error w may hold a partial checkpoint.
//
// Save needs quiescence: no Insert or UpdatePriorities may run during the
// call (samplers may; their counter increments may or may not be included).
// Save checks what it can see of that first: a slot being written, or a
// stripe whose cursor differs from its completed count, fails the call
// rather than producing a checkpoint Load would refuse. So does a NaN or
// infinite value in a float column (Insert stores what it is given; the
// error names the column and the slot).
//
// Cost: O(Capacity × item size); columns are written in bulk into the
// section's chunks (64 KiB each, with a CRC-32C over every byte), each
// gathered from the row-major records 64 KiB at a time; other scratch
// space is O(Stripes).
func (b *Buffer) Save(w io.Writer) error {
	if w == nil {
		return fmt.Errorf("%w: Save to a nil io.Writer", ErrNil)
	}
	js, err := encodeConfig(b.cfg)
	if err != nil {
		return fmt.Errorf("buffer: Save: %w", err)
	}
	if err := b.checkCheckpoint(); err != nil {
		return fmt.Errorf("buffer: Save needs a quiescent buffer (no concurrent Insert or UpdatePriorities): %w", err)
	}
	if invariantsEnabled {
		if err := b.CheckInvariants(); err != nil {
			panic("buffer: invariant violated before Save: " + err.Error())
		}
	}
	cols, err := b.ckColumns(b.ckLayout())
	if err != nil {
		return fmt.Errorf("buffer: Save: %w", err)
	}
	if err := b.checkFiniteRecords(cols); err != nil {
		return fmt.Errorf("buffer: Save: %w (a checkpoint must load, and Load refuses non-finite data)", err)
	}
	err = checkpoint.Save(w, ckKind, ckVersion, func(w io.Writer) error {
		cw := &ckWriter{w: w}
		cw.write(binary.LittleEndian.AppendUint32(nil, uint32(len(js))))
		cw.write(js)
		cw.pad(len(js))

		c := &b.c
		counters := []uint64{
			c.samples.Load(), c.updates.Load(), c.staleUpd.Load(), c.staleReads.Load(),
			c.torn.Load(), c.clamped.Load(), c.nextStripe.Load(), c.maxUnits.Load(),
			c.fallbacks.Load(),
		}
		writeSection(cw, ckIDCounters, counters)
		st := make([]uint64, 0, 3*len(b.stripes))
		for s := range b.stripes {
			h := &b.stripes[s]
			st = append(st, h.cursor.Load(), h.written.Load(), h.inserts.Load())
		}
		writeSection(cw, ckIDStripes, st)

		// Leaves: atomic loads, encoded a chunk at a time.
		cw.header(ckIDLeaves, 8, b.cfg.Capacity)
		buf := make([]byte, 0, 8<<10)
		leaves := b.tree[0]
		for s := range b.stripes {
			base := b.lay.node(0, s, 0)
			for l := range b.lay.stripeCap(s) {
				buf = binary.LittleEndian.AppendUint64(buf, leaves[base+l].Load())
				if len(buf) == cap(buf) {
					cw.write(buf)
					buf = buf[:0]
				}
			}
		}
		cw.write(buf)

		scratch := make([]byte, ckScratch)
		for _, col := range cols {
			b.writeRecordColumn(cw, col, &scratch)
		}
		return cw.err
	})
	if err != nil {
		return fmt.Errorf("buffer: Save: %w", err)
	}
	return nil
}

// Load reads a checkpoint written by Save or SaveStriped and returns a new
// Buffer equal to the saved one: same Config, counters, generations, priorities, columns and
// running maximum; its trees are rebuilt from the leaves. Load reads exactly
// the checkpoint's bytes from r (it does not buffer ahead), so a checkpoint
// may be followed by other data.
//
// A stream that is not a valid checkpoint is refused with an error wrapping
// ErrCorrupt that says what was wrong: bad magic, another kind of section,
// a newer version, a file of the earlier format (APEXREPL, refused with a
// *checkpoint.LegacyError that says what to do), a config
// that does not validate (the error then also wraps ErrConfig) or is not in
// Save's canonical encoding, truncation, a section of the wrong shape,
// nonzero padding, a checksum mismatch, or contents that no quiescent buffer
// can hold (counters inconsistent with the config, odd generations,
// priorities above the maximum, a never-written slot with a priority, slots
// filled out of ring order, discrete actions outside NumActions, a NaN or
// infinite observation, action, reward, discount or Floats value: the error
// names the column and the slot). A read error other than end of stream is
// returned wrapped as is.
//
// Memory: the config is validated and the sizes it declares are bounded
// before anything large is allocated. An in-memory reader (*bytes.Reader,
// *bytes.Buffer, *strings.Reader) too short for the declared sizes is
// refused at once; for an io.Seeker long enough, sections are allocated
// whole; otherwise they grow only as data arrives, so a short hostile
// stream cannot make Load allocate much more than it supplied. The items
// are stored row-major and a checkpoint holds columns: from a stream known
// to hold every declared byte (the in-memory readers, a long enough
// Seeker such as a file, or a reader with a method Remaining() int64 that
// reports the bytes it has left, as a buffered reader over a file can) the
// columns are read straight into the records,
// 64 KiB at a time; from another stream they are read whole and packed
// into the records once every byte has arrived (at that peak Load holds
// both, about twice the stored data).
//
// Cost: O(Capacity × item size), reading columns in bulk. The returned
// Buffer is not shared with anything; Load itself is safe to call
// concurrently.
func Load(r io.Reader) (*Buffer, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: Load from a nil io.Reader", ErrNil)
	}
	var (
		b                           *Buffer
		cols                        []ckColumn
		data                        *Transitions // the columns, packed into records once read
		counters, stripeCtr, leaves []uint64
	)
	avail, authoritative, err := remainingBytes(r)
	if err != nil {
		return nil, fmt.Errorf("buffer: reading checkpoint: %w", err)
	}
	err = checkpoint.Load(r, ckKind, ckVersionStriped, func(version uint32, p io.Reader) error {
		cr := &ckReader{r: p}
		var hdr [4]byte
		if err := cr.read(hdr[:], "header"); err != nil {
			return err
		}
		clen := binary.LittleEndian.Uint32(hdr[:])
		if clen > maxConfigBytes {
			return fmt.Errorf("%w: config of %d bytes exceeds the limit of %d", ErrCorrupt, clen, maxConfigBytes)
		}
		// The config is small (bounded above); read it, then its padding.
		js := make([]byte, int(clen)+pad8(int(clen)))
		if err := cr.read(js, "config"); err != nil {
			return err
		}
		if !allZero(js[clen:]) {
			return fmt.Errorf("%w: nonzero padding after the config", ErrCorrupt)
		}
		cfg, err := decodeConfig(js[:clen])
		if err != nil {
			return err
		}

		b = &Buffer{cfg: cfg}
		data = &Transitions{}
		if len(cfg.Floats) > 0 {
			data.Floats = make([][]float32, len(cfg.Floats))
		}
		if cols, err = b.ckColumns(data); err != nil {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		nStripeCtr, ok := mulBounded(cfg.Stripes, 3, maxCheckpointBytes/8)
		if !ok {
			return fmt.Errorf("%w: %d stripes exceed the checkpoint size limit", ErrCorrupt, cfg.Stripes)
		}
		var need int64
		if version == ckVersionStriped {
			need, err = ckRemainingStriped(&cfg, cols)
		} else {
			need, err = ckRemaining(&cfg, nStripeCtr, cols)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		// What r held bounds what the payload can (the framing only adds
		// bytes): an in-memory reader too short is refused at once, and a
		// long enough one lets sections be allocated whole.
		if avail >= 0 {
			need += int64(4 + len(js))
			if avail < need && authoritative {
				return fmt.Errorf("%w: truncated: the config declares a payload of %d bytes but the stream holds %d", ErrCorrupt, need, avail)
			}
			cr.exact = avail >= need
		}
		if version == ckVersionStriped {
			counters, stripeCtr, leaves, err = b.loadStriped(cr, cols)
			return err
		}

		if counters, err = readSection[uint64](cr, ckIDCounters, "counters", ckNumCounters); err != nil {
			return err
		}
		if stripeCtr, err = readSection[uint64](cr, ckIDStripes, "stripes", nStripeCtr); err != nil {
			return err
		}
		if leaves, err = readSection[uint64](cr, ckIDLeaves, "leaves", cfg.Capacity); err != nil {
			return err
		}
		for _, col := range cols {
			if err := b.loadColumn(cr, col); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case err == nil:
	case errors.Is(err, ErrCorrupt):
		return nil, err
	case errors.Is(err, checkpoint.ErrCorrupt), errors.Is(err, checkpoint.ErrFormat):
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	default:
		return nil, fmt.Errorf("buffer: reading checkpoint: %w", err)
	}

	b.initIndex()
	b.finishRows(data)
	c := &b.c
	c.samples.Store(counters[0])
	c.updates.Store(counters[1])
	c.staleUpd.Store(counters[2])
	c.staleReads.Store(counters[3])
	c.torn.Store(counters[4])
	c.clamped.Store(counters[5])
	c.nextStripe.Store(counters[6])
	c.maxUnits.Store(counters[7])
	c.fallbacks.Store(counters[8])
	for s := range b.stripes {
		h := &b.stripes[s]
		h.cursor.Store(stripeCtr[3*s])
		h.written.Store(stripeCtr[3*s+1])
		h.inserts.Store(stripeCtr[3*s+2])
		base, off := b.lay.node(0, s, 0), b.lay.stripeOffset(s)
		for l := range b.lay.stripeCap(s) {
			b.tree[0][base+l].Store(leaves[off+l])
		}
	}
	if err := b.checkCheckpoint(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err := b.checkFiniteRecords(cols); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	b.rebuildTrees()
	return b, nil
}

// initIndex sets up everything of a Buffer but its data columns from b.cfg
// (validated): New and Load both start with it.
func (b *Buffer) initIndex() {
	cfg := &b.cfg
	b.q, _ = newQuantizer(cfg.Capacity, cfg.MaxPriority)
	b.lay = newLayout(cfg.Capacity, cfg.Stripes)
	b.width = cfg.ActionDim
	b.init, _ = b.q.units(cfg.InitialPriority)
	b.c.maxUnits.Store(b.init)
	b.nlev = b.lay.levels()
	b.stripes = make([]stripe, cfg.Stripes)
	b.drained = make(chan struct{}, 1)
	b.tree = make([][]atomic.Uint64, b.nlev)
	for k := range b.nlev {
		b.tree[k] = make([]atomic.Uint64, cfg.Stripes*b.lay.m[k])
	}
	if !cfg.NoMinTree {
		b.mins = make([][]atomic.Uint64, b.nlev)
		for k := 1; k < b.nlev; k++ {
			b.mins[k] = make([]atomic.Uint64, cfg.Stripes*b.lay.m[k])
			for i := range b.mins[k] {
				b.mins[k][i].Store(emptyMin)
			}
		}
		for s := range b.stripes {
			b.stripes[s].minRoot.Store(emptyMin)
		}
	}
}

// checkCheckpoint reports the first reason b's stripe counters, leaves,
// running maximum or stored actions could not be those of a quiescent
// buffer (one Insert and UpdatePriorities could have produced), including
// generations that disagree with the stripe's insert count. Save runs it
// before writing and Load after reading, so whatever Save writes loads.
// O(Capacity).
func (b *Buffer) checkCheckpoint() error {
	if m := b.c.maxUnits.Load(); m > b.q.maxUnits {
		return fmt.Errorf("running maximum priority is %d units, above the maximum %d", m, b.q.maxUnits)
	}
	leaves := b.tree[0]
	nact := b.cfg.NumActions
	if b.rl.action < 0 {
		nact = 0
	}
	for s := range b.stripes {
		h := &b.stripes[s]
		cur, wr := h.cursor.Load(), h.written.Load()
		switch {
		case wr > cur:
			return fmt.Errorf("stripe %d: written %d > cursor %d", s, wr, cur)
		case cur != wr:
			return fmt.Errorf("stripe %d: cursor %d but only %d inserts completed (an insert is in flight)", s, cur, wr)
		}
		sc := b.lay.stripeCap(s)
		filled := int(min(wr, uint64(sc)))
		base, off := b.lay.node(0, s, 0), b.lay.stripeOffset(s)
		for l := range b.lay.m[0] {
			w := leaves[base+l].Load()
			g, u := w>>prioBits, w&prioMask
			switch {
			case l >= sc:
				if w != 0 {
					return fmt.Errorf("stripe %d: padding leaf %d is %#x", s, l, w)
				}
			case g&1 == 1:
				return fmt.Errorf("slot %d (stripe %d): generation %d is odd (a write in progress)", off+l, s, g)
			case g == 0 && u != 0:
				return fmt.Errorf("slot %d (stripe %d): never written (generation 0) but priority %d units", off+l, s, u)
			case u > b.q.maxUnits:
				return fmt.Errorf("slot %d (stripe %d): priority %d units above the maximum %d", off+l, s, u, b.q.maxUnits)
			case l < filled && g == 0:
				return fmt.Errorf("slot %d (stripe %d): never written, but the stripe's counters say its first %d slots are", off+l, s, filled)
			case l >= filled && g != 0:
				return fmt.Errorf("slot %d (stripe %d): written (generation %d), but the stripe's counters say only its first %d slots are", off+l, s, g, filled)
			case nact > 0 && g != 0 && (b.actionAt(off+l) < 0 || int(b.actionAt(off+l)) >= nact):
				return fmt.Errorf("slot %d (stripe %d): action %d outside [0, NumActions=%d)", off+l, s, b.actionAt(off+l), nact)
			case l < filled && g != posGen((wr-1-uint64(l))/uint64(sc)):
				// Every write advances a slot's generation by one step, so
				// the stripe's insert count fixes it (Watcher relies on it).
				laps := (wr-1-uint64(l))/uint64(sc) + 1
				return fmt.Errorf("slot %d (stripe %d): generation %d, but the stripe's counters say it was written %d times, which gives generation %d",
					off+l, s, g, laps, posGen(laps-1))
			}
		}
	}
	return nil
}

// checkFiniteColumns reports the first NaN or infinity in a float column
// (observations, actions, rewards, discounts, Floats columns), naming the
// column, the slot and, for a column wider than one value, the component.
// Such a value would poison every step that samples it; the actors' n-step
// adder and policies never produce one. O(Capacity × item width), one
// pass without a branch per value.
func checkFiniteColumns(cols []ckColumn, capacity int) error {
	for _, c := range cols {
		p, ok := c.ptr.(*[]float32)
		if !ok {
			continue
		}
		v := *p
		var acc float32
		for _, x := range v {
			acc += x * 0 // 0 for finite x, NaN otherwise
		}
		if acc == 0 {
			continue
		}
		width := max(1, c.n/max(1, capacity))
		for i, x := range v {
			if x-x != 0 {
				if width == 1 {
					return fmt.Errorf("slot %d: %s is %v (must be finite)", i, c.name, x)
				}
				return fmt.Errorf("slot %d: %s[%d] is %v (must be finite)", i/width, c.name, i%width, x)
			}
		}
	}
	return nil
}

// rebuildTrees recomputes every internal sum node, stripe root, min node and
// stripe minRoot from the leaves, exactly. Needs quiescence. O(Capacity).
func (b *Buffer) rebuildTrees() {
	for s := range b.stripes {
		for k := 1; k <= b.nlev; k++ {
			nodes := 1 // level nlev is the stripe root
			if k < b.nlev {
				nodes = b.lay.m[k]
			}
			child := b.tree[k-1]
			for j := range nodes {
				var sum uint64
				mn := emptyMin
				if j*fanout < b.lay.m[k-1] { // else a padding node: no children
					cb := b.lay.node(k-1, s, j*fanout)
					for x := range fanout {
						v := child[cb+x].Load()
						if k == 1 {
							v &= prioMask
							if v != 0 {
								mn = min(mn, v)
							}
						} else if b.mins != nil {
							mn = min(mn, b.mins[k-1][cb+x].Load())
						}
						sum += v
					}
				}
				b.sumNode(k, s, j).Store(sum)
				if b.mins != nil {
					b.minNode(k, s, j).Store(mn)
				}
			}
		}
	}
}

// ckConfig is the JSON form of a Config in a checkpoint. Its field names
// are the format's, independent of the Go field names.
type ckConfig struct {
	Capacity        int       `json:"capacity"`
	Stripes         int       `json:"stripes"`
	ObsDim          int       `json:"obs_dim"`
	Action          string    `json:"action"`
	ActionDim       int       `json:"action_dim"`
	NumActions      int       `json:"num_actions"`
	Episode         bool      `json:"episode"`
	GlobalStep      bool      `json:"global_step"`
	ActorID         bool      `json:"actor_id"`
	StateHash       bool      `json:"state_hash"`
	Floats          []ckFloat `json:"floats"`
	MaxPriority     float64   `json:"max_priority"`
	InitialPriority float64   `json:"initial_priority"`
	NoMinTree       bool      `json:"no_min_tree"`
}

type ckFloat struct {
	Name  string `json:"name"`
	Width int    `json:"width"`
}

// encodeConfig is the canonical encoding of a validated config.
func encodeConfig(c Config) ([]byte, error) {
	j := ckConfig{
		Capacity: c.Capacity, Stripes: c.Stripes, ObsDim: c.ObsDim,
		Action: c.Action.String(), ActionDim: c.ActionDim, NumActions: c.NumActions,
		Episode: c.Episode, GlobalStep: c.GlobalStep, ActorID: c.ActorID, StateHash: c.StateHash,
		Floats:      make([]ckFloat, len(c.Floats)),
		MaxPriority: c.MaxPriority, InitialPriority: c.InitialPriority, NoMinTree: c.NoMinTree,
	}
	for i, f := range c.Floats {
		if !utf8.ValidString(f.Name) {
			return nil, fmt.Errorf("%w: Floats[%d] name %q is not valid UTF-8 and cannot be checkpointed", ErrConfig, i, f.Name)
		}
		j.Floats[i] = ckFloat(f)
	}
	js, err := json.Marshal(&j)
	if err != nil {
		return nil, err
	}
	if len(js) > maxConfigBytes {
		return nil, fmt.Errorf("%w: the config encodes to %d bytes, more than a checkpoint holds (%d)", ErrConfig, len(js), maxConfigBytes)
	}
	return js, nil
}

// decodeConfig parses and validates a checkpoint's config and checks that
// it is in canonical form.
func decodeConfig(js []byte) (Config, error) {
	var j ckConfig
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return Config{}, fmt.Errorf("%w: config: %v", ErrCorrupt, err)
	}
	c := Config{
		Capacity: j.Capacity, Stripes: j.Stripes, ObsDim: j.ObsDim,
		ActionDim: j.ActionDim, NumActions: j.NumActions,
		Episode: j.Episode, GlobalStep: j.GlobalStep, ActorID: j.ActorID, StateHash: j.StateHash,
		MaxPriority: j.MaxPriority, InitialPriority: j.InitialPriority, NoMinTree: j.NoMinTree,
	}
	switch j.Action {
	case Discrete.String():
		c.Action = Discrete
	case Continuous.String():
		c.Action = Continuous
	default:
		return Config{}, fmt.Errorf("%w: config: unknown action kind %q", ErrCorrupt, j.Action)
	}
	for _, f := range j.Floats {
		c.Floats = append(c.Floats, FloatColumn(f))
	}
	v, err := c.validated()
	if err != nil {
		return Config{}, fmt.Errorf("%w: config: %w", ErrCorrupt, err)
	}
	canon, err := encodeConfig(v)
	if err != nil {
		return Config{}, fmt.Errorf("%w: config: %w", ErrCorrupt, err)
	}
	if !bytes.Equal(canon, js) {
		i := 0
		for i < min(len(canon), len(js)) && canon[i] == js[i] {
			i++
		}
		return Config{}, fmt.Errorf("%w: config is not in Save's canonical encoding (differs at byte %d of %d)", ErrCorrupt, i, len(js))
	}
	return v, nil
}

// ckColumn is one data column of a checkpoint: ptr points at the column of
// a Transitions of Capacity rows (*[]float32, *[]int32, *[]uint32,
// *[]uint64 or *[]int64) and n is the number of values the config gives it.
type ckColumn struct {
	id   uint32
	name string
	n    int
	ptr  any
}

// ckColumns lists the data columns of t (b's items in columnar form:
// Buffer.columns, or what Load reads and packs) in checkpoint order, sized
// from b.cfg. t.Floats must have one entry per Config.Floats column.
func (b *Buffer) ckColumns(t *Transitions) ([]ckColumn, error) {
	c := &b.cfg
	var cols []ckColumn
	var err error
	add := func(id uint32, name string, width int, ptr any) {
		if err != nil {
			return
		}
		n, ok := mulBounded(c.Capacity, width, maxCheckpointBytes/8)
		if !ok {
			err = fmt.Errorf("column %s: %d slots × %d values exceeds the checkpoint size limit", name, c.Capacity, width)
			return
		}
		cols = append(cols, ckColumn{id: id, name: name, n: n, ptr: ptr})
	}
	add(ckIDObs, "obs", c.ObsDim, &t.Obs)
	add(ckIDNextObs, "next_obs", c.ObsDim, &t.NextObs)
	if c.Action == Discrete {
		add(ckIDAction, "action", 1, &t.Action)
	} else {
		add(ckIDActionVec, "action_vec", c.ActionDim, &t.ActionVec)
	}
	add(ckIDReward, "reward", 1, &t.Reward)
	add(ckIDDiscount, "discount", 1, &t.Discount)
	add(ckIDFlags, "flags", 1, &t.Flags)
	if c.Episode {
		add(ckIDEpisodeID, "episode_id", 1, &t.EpisodeID)
		add(ckIDEpisodeStep, "episode_step", 1, &t.EpisodeStep)
	}
	if c.GlobalStep {
		add(ckIDGlobalStep, "global_step", 1, &t.GlobalStep)
	}
	if c.ActorID {
		add(ckIDActorID, "actor_id", 1, &t.ActorID)
	}
	if c.StateHash {
		add(ckIDStateHash, "state_hash", 1, &t.StateHash)
		add(ckIDNextStateHash, "next_state_hash", 1, &t.NextStateHash)
	}
	if len(t.Floats) != len(c.Floats) {
		return nil, fmt.Errorf("buffer has %d float columns, the config %d", len(t.Floats), len(c.Floats))
	}
	for i, f := range c.Floats {
		add(ckIDFloats+uint32(i), "floats["+f.Name+"]", f.Width, &t.Floats[i])
	}
	return cols, err
}

// ckSectionName names a section id for error messages.
func ckSectionName(id uint32) string {
	names := [...]string{
		ckIDCounters: "counters", ckIDStripes: "stripes", ckIDLeaves: "leaves",
		ckIDObs: "obs", ckIDNextObs: "next_obs", ckIDAction: "action", ckIDActionVec: "action_vec",
		ckIDReward: "reward", ckIDDiscount: "discount", ckIDFlags: "flags",
		ckIDEpisodeID: "episode_id", ckIDEpisodeStep: "episode_step", ckIDGlobalStep: "global_step",
		ckIDActorID: "actor_id", ckIDStateHash: "state_hash", ckIDNextStateHash: "next_state_hash",
	}
	switch {
	case id < uint32(len(names)) && names[id] != "":
		return names[id]
	case id >= ckIDFloats:
		return fmt.Sprintf("floats #%d", id-ckIDFloats)
	}
	return fmt.Sprintf("unknown section %d", id)
}

// ckRemaining is the number of bytes a checkpoint with this config holds
// after its header and config, refusing sizes beyond maxCheckpointBytes.
func ckRemaining(cfg *Config, nStripeCtr int, cols []ckColumn) (int64, error) {
	total := uint64(4) // checksum
	add := func(name string, n, elem int) error {
		nb, ok := mulBounded(n, elem, maxCheckpointBytes)
		if !ok {
			return fmt.Errorf("section %s: %d values of %d bytes exceed the checkpoint size limit", name, n, elem)
		}
		total += uint64(ckSectionHeader + nb + pad8(nb))
		if total > maxCheckpointBytes {
			return fmt.Errorf("the config declares more than %d bytes of data", uint64(maxCheckpointBytes))
		}
		return nil
	}
	if err := add("counters", ckNumCounters, 8); err != nil {
		return 0, err
	}
	if err := add("stripes", nStripeCtr, 8); err != nil {
		return 0, err
	}
	if err := add("leaves", cfg.Capacity, 8); err != nil {
		return 0, err
	}
	for _, c := range cols {
		if err := add(c.name, c.n, columnElem(c)); err != nil {
			return 0, err
		}
	}
	return int64(total), nil
}

func columnElem(c ckColumn) int {
	switch c.ptr.(type) {
	case *[]uint64, *[]int64:
		return 8
	}
	return 4
}

// mulBounded returns a*b if both are non-negative and the product is at
// most limit.
func mulBounded(a, b int, limit uint64) (int, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > limit || lo > math.MaxInt {
		return 0, false
	}
	return int(lo), true
}

func pad8(n int) int { return (8 - n%8) % 8 }

func allZero(p []byte) bool {
	for _, c := range p {
		if c != 0 {
			return false
		}
	}
	return true
}

// remainingBytes reports how many bytes r has left, or -1 if unknown.
// authoritative is true for in-memory readers, whose length is exact; a
// Seeker's length is only used as an allocation hint.
func remainingBytes(r io.Reader) (n int64, authoritative bool, err error) {
	switch v := r.(type) {
	case *bytes.Reader:
		return int64(v.Len()), true, nil
	case *bytes.Buffer:
		return int64(v.Len()), true, nil
	case *strings.Reader:
		return int64(v.Len()), true, nil
	case interface{ Remaining() int64 }:
		if n := v.Remaining(); n >= 0 {
			return n, false, nil
		}
		return -1, false, nil
	case io.Seeker:
		cur, err := v.Seek(0, io.SeekCurrent)
		if err != nil {
			return -1, false, nil
		}
		end, err := v.Seek(0, io.SeekEnd)
		if err != nil {
			return -1, false, nil
		}
		if _, err := v.Seek(cur, io.SeekStart); err != nil {
			return -1, false, err
		}
		if end < cur {
			return -1, false, nil
		}
		return end - cur, false, nil
	}
	return -1, false, nil
}

// word is the element type of a checkpoint section.
type word interface {
	~uint32 | ~int32 | ~float32 | ~uint64 | ~int64
}

// wordBytes views s as its in-memory bytes.
func wordBytes[T word](s []T) []byte {
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

// ckWriter writes through w (the section's payload, which buffers and
// checksums it); the first error sticks.
type ckWriter struct {
	w   io.Writer
	err error
	n   int64
}

func (cw *ckWriter) write(p []byte) {
	if cw.err != nil || len(p) == 0 {
		return
	}
	_, cw.err = cw.w.Write(p)
	cw.n += int64(len(p))
}

var zeroPad [8]byte

// pad writes the zero bytes that follow n bytes of data.
func (cw *ckWriter) pad(n int) { cw.write(zeroPad[:pad8(n)]) }

func (cw *ckWriter) header(id uint32, elem, count int) {
	var h [ckSectionHeader]byte
	binary.LittleEndian.PutUint32(h[0:], id)
	binary.LittleEndian.PutUint32(h[4:], uint32(elem))
	binary.LittleEndian.PutUint64(h[8:], uint64(count))
	cw.write(h[:])
}

// writeSection writes a whole section holding s.
func writeSection[T word](cw *ckWriter, id uint32, s []T) {
	var zero T
	elem := int(unsafe.Sizeof(zero))
	n := len(s)
	cw.header(id, elem, n)
	if nativeLittleEndian {
		cw.write(wordBytes(s))
	} else {
		var buf [4096]byte
		for len(s) > 0 {
			k := min(len(s), len(buf)/elem)
			encodeLE(buf[:k*elem], s[:k])
			cw.write(buf[:k*elem])
			s = s[k:]
		}
	}
	cw.pad(n * elem)
}

// encodeLE encodes s little endian into dst (len(dst) = len(s)*size).
func encodeLE[T word](dst []byte, s []T) {
	var zero T
	if unsafe.Sizeof(zero) == 4 {
		u := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
		for i, v := range u {
			binary.LittleEndian.PutUint32(dst[4*i:], v)
		}
		return
	}
	u := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
	for i, v := range u {
		binary.LittleEndian.PutUint64(dst[8*i:], v)
	}
}

// decodeLE converts s in place from little endian to native order.
func decodeLE[T word](s []T) {
	if !nativeLittleEndian {
		swapWords(s)
	}
}

// swapWords reverses the byte order of every value of s.
func swapWords[T word](s []T) {
	var zero T
	if unsafe.Sizeof(zero) == 4 {
		u := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
		for i, v := range u {
			u[i] = bits.ReverseBytes32(v)
		}
		return
	}
	u := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
	for i, v := range u {
		u[i] = bits.ReverseBytes64(v)
	}
}

func writeColumn(cw *ckWriter, c ckColumn) error {
	switch p := c.ptr.(type) {
	case *[]float32:
		return writeColumnOf(cw, c, *p)
	case *[]int32:
		return writeColumnOf(cw, c, *p)
	case *[]uint32:
		return writeColumnOf(cw, c, *p)
	case *[]uint64:
		return writeColumnOf(cw, c, *p)
	case *[]int64:
		return writeColumnOf(cw, c, *p)
	}
	return fmt.Errorf("column %s: unsupported type %T", c.name, c.ptr)
}

func writeColumnOf[T word](cw *ckWriter, c ckColumn, s []T) error {
	if len(s) != c.n {
		return fmt.Errorf("column %s holds %d values, the config says %d", c.name, len(s), c.n)
	}
	writeSection(cw, c.id, s)
	return nil
}

// ckReader reads exactly what it is asked for from r (the section's
// payload, whose chunks are checked as they arrive), keeping the offset for
// error messages.
type ckReader struct {
	r   io.Reader
	off int64
	// exact: the stream is known to hold every declared byte, so sections
	// are allocated whole rather than grown as data arrives.
	exact bool
}

func (cr *ckReader) read(p []byte, what string) error {
	n, err := io.ReadFull(cr.r, p)
	cr.off += int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: truncated at byte %d, reading %s", ErrCorrupt, cr.off, what)
		}
		return fmt.Errorf("buffer: reading checkpoint (%s, byte %d): %w", what, cr.off, err)
	}
	return nil
}

// readSection reads a section header, checks it against id and n, and
// reads its n values and padding.
func readSection[T word](cr *ckReader, id uint32, name string, n int) ([]T, error) {
	var zero T
	elem := int(unsafe.Sizeof(zero))
	var h [ckSectionHeader]byte
	if err := cr.read(h[:], name+" section header"); err != nil {
		return nil, err
	}
	gotID := binary.LittleEndian.Uint32(h[0:])
	gotElem := binary.LittleEndian.Uint32(h[4:])
	gotN := binary.LittleEndian.Uint64(h[8:])
	switch {
	case gotID != id:
		return nil, fmt.Errorf("%w: at byte %d: found section %s, want %s", ErrCorrupt, cr.off-ckSectionHeader, ckSectionName(gotID), name)
	case gotElem != uint32(elem):
		return nil, fmt.Errorf("%w: section %s: %d-byte values, want %d", ErrCorrupt, name, gotElem, elem)
	case gotN != uint64(n):
		return nil, fmt.Errorf("%w: section %s: %d values, the config needs %d", ErrCorrupt, name, gotN, n)
	}
	var s []T
	if cr.exact || n*elem <= ckChunk {
		s = make([]T, n)
		if err := cr.read(wordBytes(s), name); err != nil {
			return nil, err
		}
	} else {
		// Grow with the data actually received.
		s = make([]T, 0, ckChunk/elem)
		for len(s) < n {
			if len(s) == cap(s) {
				g := make([]T, len(s), min(n, 2*cap(s)))
				copy(g, s)
				s = g
			}
			k := min(n, cap(s)) - len(s)
			if err := cr.read(wordBytes(s[len(s):len(s)+k]), name); err != nil {
				return nil, err
			}
			s = s[:len(s)+k]
		}
	}
	decodeLE(s)
	var pad [8]byte
	p := pad[:pad8(n*elem)]
	if err := cr.read(p, name+" padding"); err != nil {
		return nil, err
	}
	if !allZero(p) {
		return nil, fmt.Errorf("%w: nonzero padding after section %s", ErrCorrupt, name)
	}
	return s, nil
}

func readColumn(cr *ckReader, c ckColumn) error {
	var err error
	switch p := c.ptr.(type) {
	case *[]float32:
		*p, err = readSection[float32](cr, c.id, c.name, c.n)
	case *[]int32:
		*p, err = readSection[int32](cr, c.id, c.name, c.n)
	case *[]uint32:
		*p, err = readSection[uint32](cr, c.id, c.name, c.n)
	case *[]uint64:
		*p, err = readSection[uint64](cr, c.id, c.name, c.n)
	case *[]int64:
		*p, err = readSection[int64](cr, c.id, c.name, c.n)
	default:
		err = fmt.Errorf("column %s: unsupported type %T", c.name, c.ptr)
	}
	return err
}
