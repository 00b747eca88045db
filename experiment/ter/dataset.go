package ter

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
)

// Transition is one environment step of a Dataset, with 0-based state
// indices (envs.NChain's StateHash).
type Transition struct {
	S, A, S2   int
	R          float64
	Terminated bool // reached s_N: no bootstrap
	Truncated  bool // hit the time limit: bootstrap from S2
	Episode    int  // 0, 1, ... in collection order
	T          int  // step within the episode, from 0
}

// Dataset is a fixed NChain dataset: uniformly random environment steps,
// as TER's tabular script collects them (collect_dataset).
type Dataset struct {
	// N is the chain length; Limit the time limit (2N²).
	N, Limit int
	// Steps are the transitions in collection order.
	Steps []Transition
	// Successes counts the terminated episodes, Truncations the timed-out
	// ones (the last episode may be neither: cut by the end of collection).
	Successes, Truncations int
	// Attempts is the number of collections drawn to get one with a
	// success (1 unless earlier ones had none).
	Attempts int
}

// errNoSuccess: no collection of MaxAttempts had a success.
var errNoSuccess = errors.New("ter: no dataset with a success")

// CollectDataset is dataset k of a run with base seed seed: steps
// uniformly random actions in envs.NChain of length n (default time limit
// 2n²), restarting at s_1 after every termination or truncation, redrawn
// (with the next attempt's seed) until it holds at least one success, at
// most maxAttempts times. Deterministic in (n, steps, seed, k). O(steps·n)
// (the environment's one-hot observations).
func CollectDataset(n, steps int, seed uint64, k, maxAttempts int) (*Dataset, error) {
	env, err := envs.NewNChain(envs.WithSize(n))
	if err != nil {
		return nil, err
	}
	for a := range maxAttempts {
		rng := rand.New(rand.NewPCG(mix(seed, uint64(k), 0, uint64(a)), mix(seed, uint64(k), 1, uint64(a))))
		ds, err := collect(env, steps, rng)
		if err != nil {
			return nil, err
		}
		if ds.Successes > 0 {
			ds.Attempts = a + 1
			return ds, nil
		}
	}
	return nil, fmt.Errorf("%w: dataset %d: %d collections of %d random steps in NChain(%d) never reached s_N", errNoSuccess, k, maxAttempts, steps, n)
}

func collect(env *envs.NChain, steps int, rng *rand.Rand) (*Dataset, error) {
	ds := &Dataset{N: env.N(), Limit: env.MaxEpisodeSteps(), Steps: make([]Transition, 0, steps)}
	env.Reset(0) // NChain ignores the seed
	ep, t := 0, 0
	for range steps {
		s := int(env.StateHash())
		a := rng.IntN(2)
		r, err := env.Step(envs.Action{Index: a})
		if err != nil {
			return nil, err
		}
		ds.Steps = append(ds.Steps, Transition{S: s, A: a, S2: int(env.StateHash()), R: r.Reward,
			Terminated: r.Terminated, Truncated: r.Truncated, Episode: ep, T: t})
		t++
		if r.Done() {
			if r.Terminated {
				ds.Successes++
			} else {
				ds.Truncations++
			}
			env.Reset(0)
			ep, t = ep+1, 0
		}
	}
	return ds, nil
}

// Buffer returns a new apex buffer holding ds, inserted in one batch in
// collection order: capacity len(Steps), the default 16 stripes, one-hot
// float32 observations (envs.NChain's), discrete actions, state hashes (the
// 0-based state indices), episode ids and steps, FlagTerminal on the
// terminations (discount 0) and FlagTruncated on the time-outs (discount
// gamma, as float32). Every item gets priority 1.
func (ds *Dataset) Buffer(gamma float64) (*buffer.Buffer, error) {
	n := len(ds.Steps)
	buf, err := buffer.New(buffer.Config{Capacity: n, ObsDim: ds.N, Action: buffer.Discrete, NumActions: 2,
		Episode: true, StateHash: true})
	if err != nil {
		return nil, err
	}
	t := buffer.Transitions{
		Obs: make([]float32, n*ds.N), NextObs: make([]float32, n*ds.N),
		Action: make([]int32, n), Reward: make([]float32, n), Discount: make([]float32, n), Flags: make([]uint32, n),
		EpisodeID: make([]uint64, n), EpisodeStep: make([]int32, n),
		StateHash: make([]uint64, n), NextStateHash: make([]uint64, n),
	}
	for i, s := range ds.Steps {
		t.Obs[i*ds.N+s.S] = 1
		t.NextObs[i*ds.N+s.S2] = 1
		t.Action[i] = int32(s.A)
		t.Reward[i] = float32(s.R)
		t.Discount[i] = float32(gamma)
		switch {
		case s.Terminated:
			t.Flags[i], t.Discount[i] = buffer.FlagTerminal, 0
		case s.Truncated:
			t.Flags[i] = buffer.FlagTruncated
		}
		t.EpisodeID[i], t.EpisodeStep[i] = uint64(s.Episode), int32(s.T)
		t.StateHash[i], t.NextStateHash[i] = uint64(s.S), uint64(s.S2)
	}
	if err := buf.Insert(&t); err != nil {
		return nil, err
	}
	if buf.Size() != n {
		return nil, fmt.Errorf("ter: buffer holds %d of the dataset's %d transitions", buf.Size(), n)
	}
	return buf, nil
}

// Pairs reports which (state, action) pairs occur in ds, indexed 2k+a.
func (ds *Dataset) Pairs() []bool {
	seen := make([]bool, 2*ds.N)
	for _, s := range ds.Steps {
		seen[2*s.S+s.A] = true
	}
	return seen
}

// mix derives a 64-bit seed from its inputs (a SplitMix64 finaliser
// chain), as experiment/cliffwalk does.
func mix(xs ...uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, x := range xs {
		h ^= x + 0x9e3779b97f4a7c15 + h<<6 + h>>2
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

// nameSeed folds a method name into a seed, so each method's stream does
// not depend on which other methods run.
func nameSeed(name string) uint64 {
	h := uint64(14695981039346656037) // FNV-1a
	for i := range len(name) {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return h
}
