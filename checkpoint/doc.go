// Package checkpoint frames the sections of apex's checkpoints: one
// framing, with magic, kind, version, length and CRC-32C, shared by every
// stateful part (the replay buffer, networks, optimizers, learners, stage
// state) and by the trainer's file, which is a sequence of such sections.
// Embedders can checkpoint their own parts the same way. The package has
// no apex imports.
//
// # Format
//
// All integers are little endian. A section is a head, zero or more
// chunks and an end marker:
//
//	head   magic "APEXCKPT" (8 bytes)
//	       version  uint32 (> 0): the version of the kind's payload
//	       kindLen  uint8 (1..MaxKind), then kindLen bytes of kind
//	       (letters, digits and ". _ - /")
//	       crc      uint32: CRC-32C (Castagnoli) of the head's bytes before it
//	chunk  n        uint32 (1..MaxChunk; writers use ChunkSize, the last
//	                chunk shorter), then n payload bytes
//	       crc      uint32: CRC-32C of the payload so far, seeded with the
//	                head's crc (a running checksum: a chunk dropped, moved
//	                or taken from another section fails it)
//	end    0        uint32
//	       total    uint64: the payload's length
//	       crc      uint32: the running CRC-32C updated with total's 8 bytes
//
// A section's payload is whatever its part writes; sections nest (a
// learner's payload holds its networks' sections). Every length is
// checked against its bound before anything is allocated: a chunk is at
// most MaxChunk bytes, so a reader holds at most one chunk in memory (and
// a writer one of ChunkSize), and a payload of any size (a replay buffer of
// many GB) streams through.
//
// # Usage
//
// A part writes its state with Save and reads it back with Load:
//
//	err := checkpoint.Save(w, "mylib.thing", 1, func(w io.Writer) error { ... })
//	err = checkpoint.Load(r, "mylib.thing", 1, func(version uint32, r io.Reader) error { ... })
//
// Load refuses a section of another kind, a version above the one the
// caller reads, a payload its function did not read to the end, and every
// damage, with an error that says which. A file that holds several
// sections is read with a Reader, whose Next returns each section's Header
// so that a caller can dispatch on the kind, and skip (Reader.Skip) or
// refuse a section it does not know.
//
// Files written by apex before this format (their magic is APEXTRN1,
// APEXREPL, APEXNET1, APEXADAM, APEXDQNL, APEXTD3L, APEXVRCL, APEXSACL or
// APEXNERS) are recognised and refused with a *LegacyError that names the
// format and its version and says what to do.
//
// # Errors
//
// Damage (a wrong checksum, a truncation, a length out of bounds, a bad
// kind) is reported with an error wrapping ErrCorrupt (and
// io.ErrUnexpectedEOF for a truncation); a well-formed stream this build
// cannot read (another kind, a newer version, a legacy file) with one
// wrapping ErrFormat. A failure of the underlying reader or writer is
// returned wrapped as it is, wrapping neither.
//
// # Concurrency
//
// A Writer or Reader is used by one goroutine at a time; the package has
// no global state.
package checkpoint
