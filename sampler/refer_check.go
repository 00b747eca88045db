package sampler

import "fmt"

// check verifies the stage's invariants (tests, and AfterStep under the
// invariants build tag). O(Capacity + episodes).
func (r *REFER) check() error {
	registered := 0
	for s, g := range r.gen {
		if g == 0 {
			if i := r.live.Index(uint32(s)); i != -1 {
				return fmt.Errorf("slot %d: free but at live index %d", s, i)
			}
			continue
		}
		registered++
		e := &r.eps[r.ep[s]]
		t := int(r.t[s])
		if (e.state != epOpen && e.state != epLive) || t >= len(e.slots) || e.slots[t] != uint32(s) {
			return fmt.Errorf("slot %d: registered to episode %d (state %d) step %d, which does not hold it", s, r.ep[s], e.state, t)
		}
		if (e.state == epLive) != (r.live.Index(uint32(s)) >= 0) {
			return fmt.Errorf("slot %d: episode state %d, live index %d", s, e.state, r.live.Index(uint32(s)))
		}
	}
	steps, held, live := 0, 0, 0
	for h := range r.eps {
		e := &r.eps[h]
		switch e.state {
		case epLive:
			live++
			steps += len(e.slots)
			if int(e.length) != len(e.slots) || e.arrived != e.length {
				return fmt.Errorf("live episode %d: length %d, %d slots, %d arrived", h, e.length, len(e.slots), e.arrived)
			}
			held += len(e.slots)
		case epOpen:
			n := 0
			for _, s := range e.slots {
				if s != referNoSlot {
					n++
				}
			}
			if int32(n) != e.arrived {
				return fmt.Errorf("open episode %d: %d slots filled, %d arrived", h, n, e.arrived)
			}
			if r.open[e.id] != int32(h) {
				return fmt.Errorf("open episode %d (id %d) is not in the open map", h, e.id)
			}
			held += n
		}
	}
	if live != r.nEps || steps != r.live.Len() {
		return fmt.Errorf("%d live episodes of %d steps, counters %d and %d", live, steps, r.nEps, r.live.Len())
	}
	if held != registered {
		return fmt.Errorf("%d steps held by episodes, %d slots registered", held, registered)
	}
	for i, s := range r.live.Slots() {
		if r.live.Index(s) != i {
			return fmt.Errorf("live[%d] = slot %d, whose index is %d", i, s, r.live.Index(s))
		}
	}
	return nil
}
