package checkpoint

import (
	"errors"
	"fmt"
	"hash/crc32"
)

// Magic opens every section.
const Magic = "APEXCKPT"

const (
	// ChunkSize is the length of the chunks a Writer cuts a payload into
	// (the last one shorter), so that a payload is framed the same however
	// it was split into writes.
	ChunkSize = 64 << 10
	// MaxChunk bounds the length of a chunk a Reader accepts, hence the
	// memory it holds for a section's payload.
	MaxChunk = 1 << 20
	// MaxKind bounds the length of a section's kind.
	MaxKind = 64

	headFixed = len(Magic) + 4 + 1 // magic, version, kindLen
)

var (
	// ErrCorrupt is wrapped by every error about a damaged section: bad
	// magic, a checksum mismatch, a truncation (io.ErrUnexpectedEOF too),
	// a length out of bounds, a malformed kind, a payload that does not
	// decode.
	ErrCorrupt = errors.New("checkpoint: corrupt")
	// ErrFormat is wrapped by every error about a well-formed section this
	// reader does not take: another kind, a version it does not read, a
	// file in a format apex used before this one (*LegacyError).
	ErrFormat = errors.New("checkpoint: unsupported")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header describes a section.
type Header struct {
	Kind    string // what the payload is, "buffer" or "model.Net"
	Version uint32 // the version of the kind's payload encoding (> 0)
}

func (h Header) String() string { return fmt.Sprintf("%s version %d", h.Kind, h.Version) }

// checkKind reports why kind cannot name a section, or nil.
func checkKind(kind string) error {
	if len(kind) == 0 || len(kind) > MaxKind {
		return fmt.Errorf("kind %q: length %d outside [1, %d]", kind, len(kind), MaxKind)
	}
	for i := range len(kind) {
		c := kind[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return fmt.Errorf("kind %q: byte %d (%#02x) is not a letter, digit or one of . _ - /", kind, i, c)
		}
	}
	return nil
}

// legacy lists the magics of the formats apex wrote before this one.
var legacy = map[string]string{
	"APEXTRN1": "a training checkpoint",
	"APEXREPL": "a replay buffer checkpoint",
	"APEXNET1": "a network checkpoint",
	"APEXADAM": "an Adam optimizer checkpoint",
	"APEXDQNL": "a DQN learner checkpoint",
	"APEXTD3L": "a TD3 learner checkpoint",
	"APEXVRCL": "a V-RACER learner checkpoint",
	"APEXSACL": "a SAC learner checkpoint",
	"APEXNERS": "a NERS stage checkpoint",
}

// LegacyError reports a stream in one of the formats apex wrote before this
// one (each part framed by hand). It wraps ErrFormat.
type LegacyError struct {
	Magic   string // "APEXTRN1"
	What    string // "a training checkpoint"
	Version uint32 // the version field that follows the magic
}

func (e *LegacyError) Error() string {
	return fmt.Sprintf("checkpoint: %s version %d (%s), written by apex before the unified checkpoint format, which this build cannot read: "+
		"resume it with the apex release that wrote it, or start a new run", e.Magic, e.Version, e.What)
}

func (e *LegacyError) Unwrap() error { return ErrFormat }

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %w", ErrCorrupt, fmt.Errorf(format, args...))
}
