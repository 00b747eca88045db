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
	off, w, elem := b.recordColumn(c)
	cw.header(c.id, elem, c.n)
	item := w * elem
	if len(*scratch) < item {
		*scratch = make([]byte, item)
	}
	per := len(*scratch) / item
	n := b.cfg.Capacity
	for g := 0; g < n; g += per {
		k := min(per, n-g)
		buf := (*scratch)[:k*item]
		for i := range k {
			copy(buf[i*item:(i+1)*item], unsafe.Slice((*byte)(unsafe.Add(b.rec(g+i), off)), item))
		}
		if !nativeLittleEndian {
			toLE(buf, elem)
		}
		cw.write(buf)
	}
	cw.pad(c.n * elem)
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
