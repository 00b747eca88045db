package model

import (
	"slices"
	"sync/atomic"
)

// Params is an immutable, versioned copy of a network's flat parameter
// vector: what the learner publishes and actors read (Acme's
// VariableSource). Nothing in this package modifies a Params after it is
// made, and its users must not either (Weights returns the shared slice),
// so any number of goroutines may read one concurrently without locks.
type Params struct {
	version uint64
	w       []float64
}

// NewParams returns a Params holding a copy of w. Cost O(len(w)); allocates.
func NewParams(version uint64, w []float64) *Params {
	return &Params{version: version, w: slices.Clone(w)}
}

// Version returns the version given at creation (the learner uses its
// update count).
func (p *Params) Version() uint64 { return p.version }

// Len returns the number of parameters.
func (p *Params) Len() int { return len(p.w) }

// Weights returns the parameters. The slice is shared and read-only: it
// must not be modified.
func (p *Params) Weights() []float64 { return p.w }

// Snapshot returns an immutable copy of n's parameters tagged with version.
// Cost O(parameters); allocates one vector (a published snapshot must never
// be reused, so there is no pooling).
func (n *Net) Snapshot(version uint64) *Params { return NewParams(version, n.params) }

// SetParams copies p's weights into n's parameters (an actor refreshing its
// copy). p is only read. Cost O(parameters), no allocation. An error
// wrapping ErrShape reports a nil p or a Params of another length.
func (n *Net) SetParams(p *Params) error {
	if p == nil {
		return errorf(ErrShape, "SetParams(nil)")
	}
	if len(p.w) != len(n.params) {
		return errorf(ErrShape, "Params version %d has %d parameters, the network %d", p.version, len(p.w), len(n.params))
	}
	copy(n.params, p.w)
	return nil
}

// Store holds the latest published Params. The learner publishes new
// snapshots; actors Load the current one without locks and, when its
// Version differs from the one they hold, copy it into their own Net with
// SetParams (every K environment steps in Ape-X).
//
// A Store is safe for concurrent use by any number of goroutines; its zero
// value is empty and ready. It must not be copied after first use. Load and
// Publish are one atomic pointer operation each (a few ns).
type Store struct {
	cur atomic.Pointer[Params]
}

// Publish makes p the current Params. The Store keeps p, which must not be
// modified afterwards (a snapshot from Net.Snapshot is never touched by the
// Net again). Readers that loaded an earlier Params keep a valid, unchanged
// copy. It panics on a nil p.
func (s *Store) Publish(p *Params) {
	if p == nil {
		panic("model: Store.Publish(nil)")
	}
	s.cur.Store(p)
}

// Load returns the current Params, or nil before the first Publish.
func (s *Store) Load() *Params { return s.cur.Load() }
