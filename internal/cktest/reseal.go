// Package cktest helps the tests and fuzzers of apex's checkpoints: Reseal
// recomputes the checksums of edited sections, so that an edit (or a
// fuzzer's mutation) reaches the payload's decoder instead of stopping at
// a checksum, as an editor that re-frames a checkpoint could.
package cktest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/apexrl/apex/checkpoint"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Reseal returns a copy of data in which every section of the checkpoint
// package's format it finds (at any offset, nested ones included) has its
// head checksum, chunk checksums, end marker total and end checksum
// recomputed. The layout is kept byte for byte otherwise: chunk lengths
// are taken as they are, and a section cut short is resealed as far as it
// goes. Cost: O(len(data) × nesting depth).
func Reseal(data []byte) []byte {
	out := make([]byte, 0, len(data))
	for i := 0; i < len(data); {
		n := section(data[i:], &out)
		if n == 0 {
			out = append(out, data[i])
			n = 1
		}
		i += n
	}
	return out
}

const headFixed = len(checkpoint.Magic) + 4 + 1

// section reseals the section at the start of d, appending it to out, and
// returns its length; 0 when d does not start with a section head.
func section(d []byte, out *[]byte) int {
	if !bytes.HasPrefix(d, []byte(checkpoint.Magic)) || len(d) < headFixed {
		return 0
	}
	kl := int(d[headFixed-1])
	if kl == 0 || kl > checkpoint.MaxKind || len(d) < headFixed+kl+4 {
		return 0
	}
	head := headFixed + kl
	crc := crc32.Checksum(d[:head], castagnoli)
	// Gather the chunks as they are.
	type chunk struct{ at, n int }
	var chunks []chunk
	var payload []byte
	j := head + 4
	for j+4 <= len(d) {
		n := int(binary.LittleEndian.Uint32(d[j:]))
		if n == 0 || n > checkpoint.MaxChunk || j+4+n > len(d) {
			break
		}
		chunks = append(chunks, chunk{j, n})
		payload = append(payload, d[j+4:j+4+n]...)
		j += 4 + n + 4
		if j > len(d) {
			j = len(d)
			break
		}
	}
	payload = Reseal(payload) // nested sections; the same length
	*out = append(*out, d[:head]...)
	*out = binary.LittleEndian.AppendUint32(*out, crc)
	p := 0
	for _, c := range chunks {
		*out = append(*out, d[c.at:c.at+4]...)
		*out = append(*out, payload[p:p+c.n]...)
		p += c.n
		crc = crc32.Update(crc, castagnoli, payload[p-c.n:p])
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], crc)
		end := min(c.at+4+c.n+4, len(d))
		*out = append(*out, b[:end-(c.at+4+c.n)]...)
	}
	if j+16 <= len(d) && binary.LittleEndian.Uint32(d[j:]) == 0 {
		var end [16]byte
		binary.LittleEndian.PutUint64(end[4:], uint64(len(payload)))
		binary.LittleEndian.PutUint32(end[12:], crc32.Update(crc, castagnoli, end[4:12]))
		*out = append(*out, end[:]...)
		return j + 16
	}
	if len(chunks) == 0 && j == head+4 {
		return head + 4
	}
	return j
}
