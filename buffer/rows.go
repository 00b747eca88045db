package buffer

import (
	"unsafe"
)

// Row storage.
//
// The items live row-major: global slot g's fields form one record of
// rowLayout.stride bytes at byte offset g·stride of Buffer.rows, every
// column of the Config at a fixed offset in the record. Sampling copies
// every column of a drawn row, so a row read from one record costs one
// cache miss (two where a record straddles a line) instead of one per
// column, and Sample's prefetch pass asks for a row's lines before its copy.
// The columnar API stays: Insert scatters a Transitions' columns into
// records, Sample and the Gather calls gather records into a Batch's
// columns, and a checkpoint holds columns (Buffer.columns, Buffer.pack).
//
// Record layout: the 8-byte scalars first (episode id, global step, state
// hashes), so they are 8-byte aligned; then the 4-byte scalars (reward,
// discount, flags, discrete action, episode step, actor id); then the
// vectors (obs, next obs, continuous action, Floats). A record of at most 64
// bytes is padded to the next power of two, so records never straddle a
// cache line and a row costs exactly one line (CartPole's 48-byte record
// becomes 64 bytes). A larger record is padded to a multiple of 8 only: it
// spans at most one line more than its size needs, and padding it to a line
// multiple would cost up to 56 bytes per item.
//
// Concurrency is the columns' protocol unchanged: fields are written and
// read 4 or 8 bytes at a time (plain on x86, atomically under -race and on
// weakly ordered CPUs: copy_plain.go, copy_atomic.go), a record's copy is
// validated by its slot's generation, and no two records share a word, so
// inserters writing neighbouring slots never touch each other's bytes.

// rowLayout is the byte offset of every column in a record; -1 marks a
// column the Config does not store.
type rowLayout struct {
	size   int // bytes of fields in a record
	stride int // bytes from one record to the next: size padded (see above)
	lines  int // cache lines the prefetch pass asks for per row
	align  bool

	episodeID, globalStep, stateHash, nextStateHash       int // 8-byte scalars
	reward, discount, flags, action, episodeStep, actorID int // 4-byte scalars
	obs, nextObs, actionVec                               int // vectors of float32
	floats                                                []int
}

// maxPrefetchLines bounds the lines the prefetch pass asks for per row: a
// larger record's copy streams anyway, and a pass of 256 rows × 8 lines
// already fills the line-fill buffers many times over.
const maxPrefetchLines = 8

// newRowLayout lays out the record of c (validated). The arithmetic cannot
// overflow: widths are at most MaxWidth and the float columns few enough
// for checkMemory to have bounded Capacity × size.
func newRowLayout(c *Config) rowLayout {
	l := rowLayout{episodeID: -1, globalStep: -1, stateHash: -1, nextStateHash: -1,
		action: -1, episodeStep: -1, actorID: -1, actionVec: -1}
	off := 0
	field := func(bytes int) int {
		o := off
		off += bytes
		return o
	}
	if c.Episode {
		l.episodeID = field(8)
	}
	if c.GlobalStep {
		l.globalStep = field(8)
	}
	if c.StateHash {
		l.stateHash = field(8)
		l.nextStateHash = field(8)
	}
	l.reward = field(4)
	l.discount = field(4)
	l.flags = field(4)
	if c.Action == Discrete {
		l.action = field(4)
	}
	if c.Episode {
		l.episodeStep = field(4)
	}
	if c.ActorID {
		l.actorID = field(4)
	}
	l.obs = field(4 * c.ObsDim)
	l.nextObs = field(4 * c.ObsDim)
	if c.Action == Continuous {
		l.actionVec = field(4 * c.ActionDim)
	}
	for _, f := range c.Floats {
		l.floats = append(l.floats, field(4*f.Width))
	}
	l.size = off
	l.stride, l.align = recordStride(off)
	l.lines = (l.stride + cacheLine - 1) / cacheLine
	if !l.align {
		l.lines++ // a record not on a line boundary may reach one line further
	}
	l.lines = min(l.lines, maxPrefetchLines)
	return l
}

// recordStride pads a record of size bytes (see Row storage); aligned
// reports whether every record then starts a cache line or lies within one.
func recordStride(size int) (stride int, aligned bool) {
	if size <= cacheLine {
		s := 8
		for s < size {
			s *= 2
		}
		return s, true
	}
	return roundUp(size, 8), false
}

// recordBytes is the bytes per slot New allocates for the records of c
// (validated): the padded record. Saturating, like itemBytes.
func recordBytes(c *Config) uint64 {
	n := itemBytes(c)
	if n > MaxBytes {
		return n // far above any allocation: no layout to compute
	}
	s, _ := recordStride(int(n))
	return uint64(s)
}

// initRows lays out and allocates the records (zeroed) for b.cfg.
func (b *Buffer) initRows() {
	b.rl = newRowLayout(&b.cfg)
	b.rows = make([]uint64, b.cfg.Capacity*b.rl.stride/8)
}

// rec is the address of global slot g's record.
func (b *Buffer) rec(g int) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(b.rows)), g*b.rl.stride)
}

// field is the element of type T at byte offset off of record p.
func field[T any](p unsafe.Pointer, off int) *T { return (*T)(unsafe.Add(p, off)) }

// actionAt is the discrete action stored in global slot g (plain read:
// quiescent callers only).
func (b *Buffer) actionAt(g int) int32 { return *field[int32](b.rec(g), b.rl.action) }

// copyIn copies rows [row0, row0+r) of t to global slots [g0, g0+r), one
// column at a time (a strided store loop per column); a nil optional column
// stores zeros.
func (b *Buffer) copyIn(g0 int, t *Transitions, row0, r int) {
	l := &b.rl
	base := b.rec(g0)
	st := l.stride
	d := b.cfg.ObsDim
	scatterScalar(base, st, l.reward, t.Reward[row0:row0+r])
	scatterScalar(base, st, l.discount, t.Discount[row0:row0+r])
	scatterOpt(base, st, l.flags, t.Flags, row0, r)
	if l.action >= 0 {
		scatterScalar(base, st, l.action, t.Action[row0:row0+r])
	} else {
		w := b.cfg.ActionDim
		scatterVec(base, st, l.actionVec, w, t.ActionVec[row0*w:(row0+r)*w])
	}
	scatterVec(base, st, l.obs, d, t.Obs[row0*d:(row0+r)*d])
	scatterVec(base, st, l.nextObs, d, t.NextObs[row0*d:(row0+r)*d])
	if l.episodeID >= 0 {
		scatterOpt(base, st, l.episodeID, t.EpisodeID, row0, r)
		scatterOpt(base, st, l.episodeStep, t.EpisodeStep, row0, r)
	}
	if l.globalStep >= 0 {
		scatterOpt(base, st, l.globalStep, t.GlobalStep, row0, r)
	}
	if l.actorID >= 0 {
		scatterOpt(base, st, l.actorID, t.ActorID, row0, r)
	}
	if l.stateHash >= 0 {
		scatterOpt(base, st, l.stateHash, t.StateHash, row0, r)
		scatterOpt(base, st, l.nextStateHash, t.NextStateHash, row0, r)
	}
	for i, f := range b.cfg.Floats {
		w := f.Width
		if len(t.Floats) == 0 || len(t.Floats[i]) == 0 {
			clearVec(base, st, l.floats[i], w, r)
			continue
		}
		scatterVec(base, st, l.floats[i], w, t.Floats[i][row0*w:(row0+r)*w])
	}
}

// scatterScalar stores src[i] at byte offset off of record i from base.
func scatterScalar[T any](base unsafe.Pointer, stride, off int, src []T) {
	p := unsafe.Add(base, off)
	for i := range src { // no pointer past the last record: checkptr refuses it
		store((*T)(unsafe.Add(p, i*stride)), src[i])
	}
}

// scatterOpt is scatterScalar for an optional column: a nil column stores
// zeros.
func scatterOpt[T any](base unsafe.Pointer, stride, off int, col []T, row0, r int) {
	if len(col) == 0 {
		var zero T
		p := unsafe.Add(base, off)
		for i := range r {
			store((*T)(unsafe.Add(p, i*stride)), zero)
		}
		return
	}
	scatterScalar(base, stride, off, col[row0:row0+r])
}

// scatterVec stores item i of src (w values) at byte offset off of record i
// from base.
func scatterVec(base unsafe.Pointer, stride, off, w int, src []float32) {
	if len(src) == 0 {
		return
	}
	p := unsafe.Add(base, off)
	q := unsafe.Pointer(unsafe.SliceData(src))
	if w == 4 && fastVec { // CartPole's observations: one 16-byte move per item
		for i := range len(src) / 4 {
			*(*[2]uint64)(unsafe.Add(p, i*stride)) = *(*[2]uint64)(unsafe.Add(q, 16*i))
		}
		return
	}
	for i := range len(src) / w {
		copyVec(unsafe.Add(p, i*stride), unsafe.Add(q, 4*w*i), w)
	}
}

// clearVec zeroes w float32 values at byte offset off of r records.
func clearVec(base unsafe.Pointer, stride, off, w, r int) {
	p := unsafe.Add(base, off)
	for i := range r {
		clearCol(unsafe.Slice((*float32)(unsafe.Add(p, i*stride)), w))
	}
}

// gatherVec copies the w values at byte offset off of record p into item
// row of col.
func gatherVec(col []float32, row, w int, p unsafe.Pointer, off int) {
	dst := col[row*w : (row+1)*w] // the bounds check, once
	copyVec(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Add(p, off), w)
}

// copyOut copies global slot g into row of dst, from one record.
func (b *Buffer) copyOut(dst *Batch, row, g int) {
	t := &dst.Transitions
	l := &b.rl
	p := b.rec(g)
	t.Reward[row] = load(field[float32](p, l.reward))
	t.Discount[row] = load(field[float32](p, l.discount))
	t.Flags[row] = load(field[uint32](p, l.flags))
	if l.action >= 0 {
		t.Action[row] = load(field[int32](p, l.action))
	} else {
		gatherVec(t.ActionVec, row, b.cfg.ActionDim, p, l.actionVec)
	}
	d := b.cfg.ObsDim
	gatherVec(t.Obs, row, d, p, l.obs)
	gatherVec(t.NextObs, row, d, p, l.nextObs)
	if l.episodeID >= 0 {
		t.EpisodeID[row] = load(field[uint64](p, l.episodeID))
		t.EpisodeStep[row] = load(field[int32](p, l.episodeStep))
	}
	if l.globalStep >= 0 {
		t.GlobalStep[row] = load(field[int64](p, l.globalStep))
	}
	if l.actorID >= 0 {
		t.ActorID[row] = load(field[int32](p, l.actorID))
	}
	if l.stateHash >= 0 {
		t.StateHash[row] = load(field[uint64](p, l.stateHash))
		t.NextStateHash[row] = load(field[uint64](p, l.nextStateHash))
	}
	for i, f := range b.cfg.Floats {
		gatherVec(t.Floats[i], row, f.Width, p, l.floats[i])
	}
}

// touchRows prefetches the lines of every row the copies will read, so the
// cache misses of all rows overlap before the copies run. A record of at
// most 64 bytes is one line; a larger one asks for up to maxPrefetchLines.
// The prefetches do not wait for their lines (a pass of plain loads did:
// Batch at 2^20 took 43 µs with it and 35 µs with prefetches, when rows
// were columns).
func (b *Buffer) touchRows(slots []int32) {
	base := unsafe.Pointer(unsafe.SliceData(b.rows))
	for k := range b.rl.lines {
		if k*cacheLine >= 8*len(b.rows) {
			break // a one-slot buffer: no pointer beyond the records (checkptr)
		}
		prefetchCol(unsafe.Add(base, k*cacheLine), uintptr(b.rl.stride), slots)
	}
}

// columns returns every slot's fields in columnar form, Capacity rows
// (slot g in row g; never-written slots hold zeros): the form a checkpoint
// writes. Needs quiescence. O(Capacity × item size) time and memory.
func (b *Buffer) columns() *Transitions {
	c := &b.cfg
	n := c.Capacity
	t := newColumns(c, n)
	bt := Batch{Transitions: *t}
	for g := range n {
		b.copyOut(&bt, g, g)
	}
	return t
}

// pack stores the Capacity rows of t (the checkpoint's columns; nil
// optional columns store zeros) into the records. Needs quiescence (Load
// calls it on a Buffer nothing else sees). O(Capacity × item size).
func (b *Buffer) pack(t *Transitions) {
	b.copyIn(0, t, 0, b.cfg.Capacity)
}

// newColumns allocates the columns of n items of c (validated), every
// optional column the Config enables included.
func newColumns(c *Config, n int) *Transitions {
	t := &Transitions{
		Obs:      make([]float32, n*c.ObsDim),
		NextObs:  make([]float32, n*c.ObsDim),
		Reward:   make([]float32, n),
		Discount: make([]float32, n),
		Flags:    make([]uint32, n),
	}
	if c.Action == Discrete {
		t.Action = make([]int32, n)
	} else {
		t.ActionVec = make([]float32, n*c.ActionDim)
	}
	if c.Episode {
		t.EpisodeID = make([]uint64, n)
		t.EpisodeStep = make([]int32, n)
	}
	if c.GlobalStep {
		t.GlobalStep = make([]int64, n)
	}
	if c.ActorID {
		t.ActorID = make([]int32, n)
	}
	if c.StateHash {
		t.StateHash = make([]uint64, n)
		t.NextStateHash = make([]uint64, n)
	}
	for _, f := range c.Floats {
		t.Floats = append(t.Floats, make([]float32, n*f.Width))
	}
	return t
}
