package learner

import (
	"fmt"
	"math"
)

// check verifies the controller's invariants (tests, and AfterStep under
// the invariants build tag): every stored episode's slots are owned by it
// at their step, the live list holds exactly those slots, and the KL
// count matches the refreshed steps. O(Capacity + episodes).
func (c *REFERController) check() error {
	steps, eps := 0, 0
	for h := range c.eps {
		e := &c.eps[h]
		if e.serial == 0 {
			continue
		}
		eps++
		steps += len(e.slots)
		for t, s := range e.slots {
			if c.own[s] != e.serial || int(c.ep[s]) != h || int(c.t[s]) != t {
				return fmt.Errorf("episode %d step %d: slot %d owned by serial %d (episode %d step %d), want serial %d", h, t, s, c.own[s], c.ep[s], c.t[s], e.serial)
			}
			if c.live.Index(s) < 0 {
				return fmt.Errorf("episode %d step %d: slot %d is not stored", h, t, s)
			}
		}
	}
	if eps != c.nEpisodes || steps != c.live.Len() {
		return fmt.Errorf("%d stored episodes of %d steps, counters %d and %d", eps, steps, c.nEpisodes, c.live.Len())
	}
	kln, kls := 0, 0.0
	for _, s := range c.live.Slots() {
		if c.klSet[s] {
			kln++
			kls += c.kl[s]
		}
	}
	if kln != c.klN || math.Abs(kls-c.klSum) > 1e-6*max(1, math.Abs(kls)) {
		return fmt.Errorf("KL sums %v over %d steps, stored %v over %d", c.klSum, c.klN, kls, kln)
	}
	return nil
}
