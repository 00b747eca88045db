package samplertest

import (
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// REFERBuffer returns an empty buffer a REFER stage accepts: 2-wide
// observations, 1-wide continuous actions, the episode columns and
// sampler.REFERColumns(1) (mean, std, V(s_T), in that order).
func REFERBuffer(t testing.TB, capacity, stripes int) *buffer.Buffer {
	t.Helper()
	b, err := buffer.New(buffer.Config{Capacity: capacity, Stripes: stripes, ObsDim: 2, Action: buffer.Continuous,
		ActionDim: 1, Episode: true, Floats: sampler.REFERColumns(1)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Episode describes an episode for a REFERBuffer, the stored data of each
// step identifying it (Rows).
type Episode struct {
	ID     uint64
	Reward []float32
	End    uint32  // buffer.FlagTerminal or buffer.FlagTruncated
	VBoot  float32 // V(s_T) stored on the last step of a truncated episode
	Gamma  float32
}

// Len is the episode's number of steps.
func (e Episode) Len() int { return len(e.Reward) }

// RandEpisode returns an episode of length in [1, maxLen] with rewards in
// [-2, 1), ending by termination or truncation (half each) with a
// bootstrap value in [-1, 1).
func RandEpisode(rng *rand.Rand, id uint64, maxLen int, gamma float32) Episode {
	e := Episode{ID: id, Reward: make([]float32, 1+rng.IntN(maxLen)), Gamma: gamma, End: buffer.FlagTerminal}
	for i := range e.Reward {
		e.Reward[i] = float32(3*rng.Float64() - 2)
	}
	if rng.IntN(2) == 0 {
		e.End, e.VBoot = buffer.FlagTruncated, float32(2*rng.Float64()-1)
	}
	return e
}

// Rows builds the transitions of steps [from, to) of e: Obs = (ID, t),
// NextObs = (ID, t+1), action 0.01·t, behaviour mean 0 and std 1,
// discount Gamma (0 at a termination), the end flag and V(s_T) on the
// last step.
func (e Episode) Rows(from, to int) *buffer.Transitions {
	n := to - from
	tr := &buffer.Transitions{
		Obs: make([]float32, 2*n), NextObs: make([]float32, 2*n), ActionVec: make([]float32, n),
		Reward: make([]float32, n), Discount: make([]float32, n), Flags: make([]uint32, n),
		EpisodeID: make([]uint64, n), EpisodeStep: make([]int32, n),
		Floats: [][]float32{make([]float32, n), make([]float32, n), make([]float32, n)},
	}
	for i := range n {
		t := from + i
		tr.Obs[2*i], tr.Obs[2*i+1] = float32(e.ID), float32(t)
		tr.NextObs[2*i], tr.NextObs[2*i+1] = float32(e.ID), float32(t+1)
		tr.ActionVec[i] = 0.01 * float32(t)
		tr.Reward[i] = e.Reward[t]
		tr.Discount[i] = e.Gamma
		tr.EpisodeID[i], tr.EpisodeStep[i] = e.ID, int32(t)
		tr.Floats[1][i] = 1
		if t == e.Len()-1 {
			tr.Flags[i] = e.End
			if e.End == buffer.FlagTerminal {
				tr.Discount[i] = 0
			} else {
				tr.Floats[2][i] = e.VBoot
			}
		}
	}
	return tr
}

// Insert inserts steps [from, to) of e into buf or fails the test.
func (e Episode) Insert(t testing.TB, buf *buffer.Buffer, from, to int) {
	t.Helper()
	if err := buf.Insert(e.Rows(from, to)); err != nil {
		t.Fatal(err)
	}
}
