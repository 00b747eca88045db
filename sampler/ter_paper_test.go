package sampler_test

// Tests tied to the TER paper (Hong et al., ICLR 2022, arXiv 2203.15845)
// and to the design notes' experiments (shared/design/methods/ter.md §6).

import (
	"github.com/apexrl/apex/sampler/samplertest"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/sampler"
)

// nchainData plays steps uniformly random actions in NChain (N = 20,
// appendix D.1), restarting after each termination or time-out, as 1-step
// transitions keyed by the state index; ok says the goal was reached.
func nchainData(t *testing.T, seed uint64, steps int) (data []terStep, n int, ok bool) {
	env, err := envs.NewNChain()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 0xc4a1))
	env.Reset(seed)
	for range steps {
		st := terStep{s: env.StateHash(), a: int32(rng.IntN(2))}
		r, err := env.Step(envs.Action{Index: int(st.a)})
		if err != nil {
			t.Fatal(err)
		}
		st.s2, st.r = env.StateHash(), float32(r.Reward)
		switch {
		case r.Terminated:
			st.flags, ok = buffer.FlagTerminal, true
		case r.Truncated:
			st.flags = buffer.FlagTruncated
		}
		data = append(data, st)
		if r.Done() {
			env.Reset(seed)
		}
	}
	return data, env.N(), ok
}

// TestTERNChainExactSweep: with lr = 1 and Q = 0, tabular Q-learning over
// one full sweep (B = 1, eta = 0, edges keyed by (state, action) as TER's
// tabular script keys them) gives Q == Q* exactly on every (s, a) pair of
// the dataset: Q*(k, fwd) = γ^(N-2-k), Q*(k, back) = γ·Q*(max(k-1, 0), fwd)
// (design notes §6.1). Every pair in a dataset with a success is
// backward-reachable (the successful episode steps forward from every
// state), and the sweep updates each exactly once, after the pair it
// bootstraps from: at most 2(N-1) updates. Q* is computed by the same
// products (γ·Q*(k+1, fwd)) the updates perform, so equality is exact in
// float64; pairs absent from the data are not checked (Q stays 0).
func TestTERNChainExactSweep(t *testing.T) {
	const gamma = 0.99
	datasets, rejected, minUpd, maxUpd := 0, 0, 1<<30, 0
	for seed := uint64(1); datasets < 50; seed++ {
		data, n, ok := nchainData(t, seed, 1000)
		if !ok {
			rejected++ // the notes' datasets have at least one success
			continue
		}
		datasets++
		qf := make([]float64, n) // Q*(k, fwd)
		qf[n-2] = 1
		for k := n - 3; k >= 0; k-- {
			qf[k] = gamma * qf[k+1]
		}
		qstar := func(k uint64, a int32) float64 {
			if a == envs.NChainForward {
				return qf[k]
			}
			return gamma * qf[max(int(k)-1, 0)]
		}

		buf := terBuffer(t, 1024, 4)
		terInsert(t, buf, 0, data)
		cfg := sampler.DefaultTERConfig(0)
		cfg.Eta, cfg.EdgeAction = 0, true
		s := newTER(t, buf, cfg)
		rng := rand.New(rand.NewPCG(seed, 7))
		bt := samplertest.NewBatch(t, buf, 1)
		q := make([][2]float64, n)
		updated := map[[2]uint64]bool{}
		updates := 0
		for {
			if err := s.Sample(rng, bt); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if s.Sweep(0) != 1 {
				break // the first sweep is over
			}
			st, a, s2 := bt.StateHash[0], bt.Action[0], bt.NextStateHash[0]
			next := 0.0
			if bt.Flags[0]&buffer.FlagTerminal == 0 {
				next = gamma * max(q[s2][0], q[s2][1])
			}
			q[st][a] = float64(bt.Reward[0]) + next
			updated[[2]uint64{st, uint64(a)}] = true
			updates++
		}
		pairs := map[[2]uint64]bool{}
		for _, d := range data {
			pairs[[2]uint64{d.s, uint64(d.a)}] = true
		}
		if len(updated) != len(pairs) || updates != len(pairs) || updates > 2*(n-1) {
			t.Fatalf("seed %d: %d updates of %d pairs; the dataset has %d pairs (at most 2(N-1) = %d)", seed, updates, len(updated), len(pairs), 2*(n-1))
		}
		minUpd, maxUpd = min(minUpd, updates), max(maxUpd, updates)
		for p := range pairs {
			k, a := p[0], int32(p[1])
			if got, want := q[k][a], qstar(k, a); got != want {
				t.Errorf("seed %d: Q(%d, %d) = %v after one sweep, Q* = %v", seed, k, a, got, want)
			}
		}
	}
	t.Logf("50 datasets exact, %d-%d updates per sweep (%d datasets without a success skipped)", minUpd, maxUpd, rejected)
}

// TestTERStitching (design notes §6.2, paper Fig. 6): episode A goes
// x0→x1→X→G and terminates; episode B goes y0→y1→X→y2 and times out.
// One sweep from G replays B's transitions into X and before it, y1→X
// when X is expanded and y0→y1 after it, with values propagated through
// X: a replay of terminated episodes only (EBU) never touches B.
func TestTERStitching(t *testing.T) {
	const (
		x0, x1, X, G, y0, y1, y2 = 1, 2, 3, 4, 5, 6, 7
		gamma                    = 0.99
	)
	epA := []terStep{{s: x0, s2: x1}, {s: x1, s2: X}, {s: X, s2: G, r: 1, flags: buffer.FlagTerminal}}
	epB := []terStep{{s: y0, s2: y1}, {s: y1, s2: X}, {s: X, s2: y2, flags: buffer.FlagTruncated}}
	type edge struct{ s, s2 uint64 }
	// value updates lr = 1 over transitions (one action per edge)
	backup := func(q map[edge]float64, e edge, r float32, terminal bool) {
		v := 0.0
		if !terminal {
			for f, x := range q {
				if f.s == e.s2 {
					v = max(v, x)
				}
			}
		}
		q[e] = float64(r) + gamma*v
	}
	for seed := uint64(1); seed <= 20; seed++ {
		buf := terBuffer(t, 16, 1)
		terInsert(t, buf, 0, epA)
		terInsert(t, buf, 3, epB)
		cfg := sampler.DefaultTERConfig(0)
		cfg.Eta = 0
		s := newTER(t, buf, cfg)
		rng := rand.New(rand.NewPCG(seed, 3))
		bt := samplertest.NewBatch(t, buf, 1)
		q := map[edge]float64{}
		var order []edge
		for {
			if err := s.Sample(rng, bt); err != nil {
				t.Fatal(err)
			}
			if s.Sweep(0) != 1 {
				break
			}
			e := edge{bt.StateHash[0], bt.NextStateHash[0]}
			order = append(order, e)
			backup(q, e, bt.Reward[0], bt.Flags[0]&buffer.FlagTerminal != 0)
		}
		at := map[edge]int{}
		for i, e := range order {
			at[e] = i
		}
		_, timeout := at[edge{X, y2}]
		if len(order) != 5 || len(at) != 5 || timeout || at[edge{X, G}] != 0 || at[edge{y1, X}] > 2 || at[edge{y0, y1}] < 3 || at[edge{x1, X}] > 2 || at[edge{x0, x1}] < 3 {
			t.Fatalf("seed %d: sweep order %v", seed, order)
		}
		if g := float64(gamma); q[edge{X, G}] != 1 || q[edge{y1, X}] != g || q[edge{y0, y1}] != g*g || q[edge{x0, x1}] != g*g {
			t.Fatalf("seed %d: values after one sweep %v", seed, q)
		}
	}

	// EBU-style replay of terminated episodes only, backwards.
	ebu := map[edge]float64{}
	for _, ep := range [][]terStep{epA, epB} {
		if ep[len(ep)-1].flags&buffer.FlagTerminal == 0 {
			continue // B timed out: not replayed
		}
		for i := len(ep) - 1; i >= 0; i-- {
			backup(ebu, edge{ep[i].s, ep[i].s2}, ep[i].r, ep[i].flags&buffer.FlagTerminal != 0)
		}
	}
	for _, e := range []edge{{y0, y1}, {y1, X}} {
		if _, ok := ebu[e]; ok {
			t.Fatalf("terminal-episode replay touched %v", e)
		}
	}
	if g := float64(gamma); ebu[edge{x0, x1}] != g*g || ebu[edge{X, G}] != 1 {
		t.Fatalf("EBU on A: %v", ebu)
	}
}
