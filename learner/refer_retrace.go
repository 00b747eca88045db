package learner

// sweep recomputes the Retrace targets of stored episode h backwards from
// step from down to step 0 (V-RACER's Eq. 8 with Q_w := V_w; refer.md §2):
//
//	Qret_t = r̂_t + d_t · Vtbc_{t+1}
//	Vtbc_t = V_t + min(1, rho_t) · (Qret_t − V_t)
//	Vtbc_T = V(s_T) if the episode was cut by a time limit, else 0
//
// where r̂_t is step t's stored reward (r_{t+1} in the paper's indexing)
// times the reward scale and d_t its stored discount (γ; 0 at a
// termination, where the bootstrap vanishes anyway). Vtbc_{from+1} is
// computed from step from+1's stored values. With every rho = 1 this is
// the discounted return, bootstrapped by V(s_T) only on truncation; with
// rho = 1 and V = 0 below the refreshed steps it is what a new episode
// gets. O(from).
func (c *REFERController) sweep(h int32, from int) {
	e := &c.eps[h]
	T := len(e.slots)
	if from >= T-1 {
		from = T - 1
	}
	if from < 0 {
		return
	}
	var next float64 // Vtbc_{from+1}
	if from == T-1 {
		if e.truncated {
			next = e.vboot
		}
	} else {
		s := e.slots[from+1]
		next = c.v[s] + min(1, c.rho[s])*(c.qret[s]-c.v[s])
	}
	for t := from; t >= 0; t-- {
		s := e.slots[t]
		q := c.rew[s]*c.rscale + c.disc[s]*next
		c.qret[s] = q
		next = c.v[s] + min(1, c.rho[s])*(q-c.v[s])
	}
}
