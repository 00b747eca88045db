package buffer

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// A checkpoint holds columns (checkpoint.go); the items live in records
// (rows.go). Save reads each column straight from the records, a chunk of
// slots at a time, so it needs no columnar copy of the buffer; Load reads
// the columns and packs them (Buffer.pack).

// ckScratch is the size of Save's column chunk.
const ckScratch = 64 << 10

// recordColumn locates checkpoint column c (from ckColumns) in a record:
// its byte offset, values per item and bytes per value.
func (b *Buffer) recordColumn(c ckColumn) (off, width, elem int) {
	l := &b.rl
	switch c.id {
	case ckIDObs:
		off = l.obs
	case ckIDNextObs:
		off = l.nextObs
	case ckIDAction:
		off = l.action
	case ckIDActionVec:
		off = l.actionVec
	case ckIDReward:
		off = l.reward
	case ckIDDiscount:
		off = l.discount
	case ckIDFlags:
		off = l.flags
	case ckIDEpisodeID:
		off = l.episodeID
	case ckIDEpisodeStep:
		off = l.episodeStep
	case ckIDGlobalStep:
		off = l.globalStep
	case ckIDActorID:
		off = l.actorID
	case ckIDStateHash:
		off = l.stateHash
	case ckIDNextStateHash:
		off = l.nextStateHash
	default:
		off = l.floats[c.id-ckIDFloats]
	}
	if off < 0 {
		panic("buffer: checkpoint column " + c.name + " is not stored") // ckColumns lists only stored columns
	}
	return off, c.n / b.cfg.Capacity, columnElem(c)
}

// writeRecordColumn writes checkpoint column c as one section, gathered
// from the records ckScratch bytes at a time (a wider item: one item at a
// time). Needs quiescence. O(Capacity × width).
func (b *Buffer) writeRecordColumn(cw *ckWriter, c ckColumn, scratch *[]byte) {
	b.writeRecordColumnFrom(cw, c, b.rec(0), b.cfg.Capacity, scratch)
}

// writeRecordColumnFrom writes column c of the n records at base (b's
// record layout: the buffer's own, or a stripe's copy) as one section of
// n × width values. O(n × width).
func (b *Buffer) writeRecordColumnFrom(cw *ckWriter, c ckColumn, base unsafe.Pointer, n int, scratch *[]byte) {
	off, w, elem := b.recordColumn(c)
	cw.header(c.id, elem, n*w)
	item := w * elem
	if len(*scratch) < item {
		*scratch = make([]byte, item)
	}
	per := len(*scratch) / item
	stride := b.rl.stride
	for g := 0; g < n; g += per {
		k := min(per, n-g)
		buf := (*scratch)[:k*item]
		for i := range k {
			copy(buf[i*item:(i+1)*item], unsafe.Slice((*byte)(unsafe.Add(base, (g+i)*stride+off)), item))
		}
		if !nativeLittleEndian {
			toLE(buf, elem)
		}
		cw.write(buf)
	}
	cw.pad(n * w * elem)
}

// toLE rewrites in place the native elem-byte values of p (4 or 8 bytes)
// as little endian: a no-op on little-endian machines, as encodeLE.
func toLE(p []byte, elem int) {
	for i := 0; i+elem <= len(p); i += elem {
		if elem == 4 {
			binary.LittleEndian.PutUint32(p[i:], *(*uint32)(unsafe.Pointer(&p[i])))
		} else {
			binary.LittleEndian.PutUint64(p[i:], *(*uint64)(unsafe.Pointer(&p[i])))
		}
	}
}

// checkFiniteRecords is checkFiniteColumns over the records: the first NaN
// or infinity of the float columns among cols, in the same order and with
// the same message. O(Capacity × item width).
func (b *Buffer) checkFiniteRecords(cols []ckColumn) error {
	for _, c := range cols {
		if _, ok := c.ptr.(*[]float32); !ok {
			continue
		}
		off, w, _ := b.recordColumn(c)
		for g := range b.cfg.Capacity {
			v := unsafe.Slice((*float32)(unsafe.Add(b.rec(g), off)), w)
			var acc float32
			for _, x := range v {
				acc += x * 0 // 0 for finite x, NaN otherwise
			}
			if acc == 0 {
				continue
			}
			for j, x := range v {
				if x-x != 0 {
					if w == 1 {
						return fmt.Errorf("slot %d: %s is %v (must be finite)", g, c.name, x)
					}
					return fmt.Errorf("slot %d: %s[%d] is %v (must be finite)", g, c.name, j, x)
				}
			}
		}
	}
	return nil
}

// ckLayout is an empty Transitions of b's columns (no storage): ckColumns
// of it names the checkpoint's columns without copying any data.
func (b *Buffer) ckLayout() *Transitions {
	return &Transitions{Floats: make([][]float32, len(b.cfg.Floats))}
}

// loadColumn reads checkpoint column c for Load. When the stream is known
// to hold every declared byte (cr.exact: an in-memory reader, or a file
// long enough), the column goes straight into the records, allocated at
// the first column: Load then never holds a columnar copy. Otherwise the
// column is read whole into its Transitions column (readColumn, growing as
// data arrives, so a short hostile stream cannot make Load allocate the
// records), and finishRows packs them once everything has arrived.
func (b *Buffer) loadColumn(cr *ckReader, c ckColumn) error {
	if !cr.exact {
		return readColumn(cr, c)
	}
	if b.rows == nil {
		b.initRows()
	}
	return b.readRecordColumn(cr, c)
}

// finishRows packs data (the columns loadColumn read whole) into the
// records, unless loadColumn already read them there.
func (b *Buffer) finishRows(data *Transitions) {
	if b.rows != nil {
		return
	}
	b.initRows()
	b.pack(data)
}

// readRecordColumn reads the section of checkpoint column c (checked as
// readSection checks it) into the records, ckScratch bytes at a time.
func (b *Buffer) readRecordColumn(cr *ckReader, c ckColumn) error {
	return b.readRecordColumnAt(cr, c, 0, b.cfg.Capacity)
}

// readRecordColumnAt reads a section of column c holding the n items of
// global slots [g0, g0+n) into their records.
func (b *Buffer) readRecordColumnAt(cr *ckReader, c ckColumn, g0, n int) error {
	off, w, elem := b.recordColumn(c)
	var h [ckSectionHeader]byte
	if err := cr.read(h[:], c.name+" section header"); err != nil {
		return err
	}
	gotID := binary.LittleEndian.Uint32(h[0:])
	gotElem := binary.LittleEndian.Uint32(h[4:])
	gotN := binary.LittleEndian.Uint64(h[8:])
	switch {
	case gotID != c.id:
		return fmt.Errorf("%w: at byte %d: found section %s, want %s", ErrCorrupt, cr.off-ckSectionHeader, ckSectionName(gotID), c.name)
	case gotElem != uint32(elem):
		return fmt.Errorf("%w: section %s: %d-byte values, want %d", ErrCorrupt, c.name, gotElem, elem)
	case gotN != uint64(n*w):
		return fmt.Errorf("%w: section %s: %d values, the config needs %d", ErrCorrupt, c.name, gotN, n*w)
	}
	item := w * elem
	per := max(1, ckScratch/item)
	scratch := make([]byte, min(per, max(n, 1))*item)
	for g := 0; g < n; g += per {
		k := min(per, n-g)
		buf := scratch[:k*item]
		if err := cr.read(buf, c.name); err != nil {
			return err
		}
		if !nativeLittleEndian {
			fromLE(buf, elem)
		}
		for i := range k {
			copy(unsafe.Slice((*byte)(unsafe.Add(b.rec(g0+g+i), off)), item), buf[i*item:(i+1)*item])
		}
	}
	var pad [8]byte
	p := pad[:pad8(n*w*elem)]
	if err := cr.read(p, c.name+" padding"); err != nil {
		return err
	}
	if !allZero(p) {
		return fmt.Errorf("%w: nonzero padding after section %s", ErrCorrupt, c.name)
	}
	return nil
}

// fromLE rewrites in place the little-endian elem-byte values of p (4 or 8
// bytes) in native order.
func fromLE(p []byte, elem int) {
	for i := 0; i+elem <= len(p); i += elem {
		if elem == 4 {
			*(*uint32)(unsafe.Pointer(&p[i])) = binary.LittleEndian.Uint32(p[i:])
		} else {
			*(*uint64)(unsafe.Pointer(&p[i])) = binary.LittleEndian.Uint64(p[i:])
		}
	}
}
