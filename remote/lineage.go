package remote

import (
	"errors"
	"fmt"
	"sync"
)

// ErrShardSwapped marks a shard refused because the server it reached
// reports the data lineage (InfoReply.lineage, Server.Lineage) that the
// client saw on another shard of its fleet: the shards' addresses were
// swapped or reused (pods restarted on each other's IPs behind one DNS
// name). Taking it would send a writer's batches to another shard's
// writer table, which would acknowledge them as duplicates (seq <= high)
// without storing them. Test with errors.Is.
var ErrShardSwapped = errors.New("the server is another shard (its data lineage was seen on that shard)")

// shardLineages records the data lineage each shard of a fleet was seen
// with, for a client that keeps per-shard state (ShardedWriter,
// ShardedMethod, ShardTracker).
//
// The rule (check): lineage 0 (a server older than lineages) is always
// taken and records nothing. A lineage seen on another shard is refused
// (ErrShardSwapped). The shard's own known lineage is taken. A lineage
// never seen, on a shard whose lineage is known, is a shard that lost its
// data (restarted without a checkpoint or from one without a writer
// table): it is taken and becomes the shard's lineage (reset reports it).
// That is safe for a writer: the new server's writer table holds nothing
// of this writer's, so every batch it is sent (seqs going on from the
// writer's) is stored, none acknowledged as a duplicate; what the old
// lineage stored is lost with it, as any shard's data lost without a
// checkpoint. Every lineage a shard had stays its own: seen later on
// another shard it is refused.
//
// Safe for concurrent use. O(1) per check; memory O(lineages seen).
type shardLineages struct {
	mu    sync.Mutex
	of    []uint64       // shard i's latest lineage (0: not seen)
	owner map[uint64]int // lineage → the shard it was seen on
}

func newShardLineages(n int) *shardLineages {
	return &shardLineages{of: make([]uint64, n), owner: map[uint64]int{}}
}

// check applies the rule to shard i reporting lineage lin: nil when it
// is taken (reset says it replaced a known lineage: the shard lost its
// data), or an error wrapping ErrShardSwapped naming the shard whose
// lineage it is (names[j], names may be nil).
func (l *shardLineages) check(i int, lin uint64, names func(int) string) (reset bool, err error) {
	return l.decide(i, lin, names, true)
}

// peek is check without recording lin: for a caller that may still
// refuse the server for another reason (its lineage must not then be
// taken as shard i's).
func (l *shardLineages) peek(i int, lin uint64, names func(int) string) (reset bool, err error) {
	return l.decide(i, lin, names, false)
}

func (l *shardLineages) decide(i int, lin uint64, names func(int) string, record bool) (reset bool, err error) {
	if lin == 0 {
		return false, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if j, ok := l.owner[lin]; ok && j != i {
		other := fmt.Sprint(j)
		if names != nil {
			other = names(j)
		}
		return false, fmt.Errorf("%w: it reports the lineage %016x of shard %s (addresses swapped or reused: name each shard, e.g. replay-0.replay:7700, or let the ShardTracker pair them by lineage)", ErrShardSwapped, lin, other)
	}
	reset = l.of[i] != 0 && l.of[i] != lin
	if record {
		l.of[i] = lin
		l.owner[lin] = i
	}
	return reset, nil
}

// get is shard i's latest lineage (0: not seen).
func (l *shardLineages) get(i int) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.of[i]
}

// ownerOf is the shard lin was seen on, or -1.
func (l *shardLineages) ownerOf(lin uint64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if j, ok := l.owner[lin]; ok && lin != 0 {
		return j
	}
	return -1
}
