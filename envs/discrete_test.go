package envs_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/envs"
)

func mustStep(t *testing.T, env envs.Env, a int) envs.StepResult {
	t.Helper()
	res, err := env.Step(envs.Action{Index: a})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestNChain(t *testing.T) {
	env, err := envs.NewNChain()
	if err != nil {
		t.Fatal(err)
	}
	if env.N() != 20 || env.MaxEpisodeSteps() != 800 {
		t.Fatalf("defaults: N = %d, limit = %d; want 20, 800", env.N(), env.MaxEpisodeSteps())
	}
	env.Reset(0)
	// Backward at s_1 does nothing.
	if res := mustStep(t, env, envs.NChainBackward); env.StateHash() != 0 || res.Reward != 0 || res.Done() {
		t.Fatalf("backward at s_1: hash %d, %+v", env.StateHash(), res)
	}
	// N-1 forward steps reach s_N: +1 on the last, terminated.
	for k := 1; k <= 19; k++ {
		res := mustStep(t, env, envs.NChainForward)
		if env.StateHash() != uint64(k) || res.Obs[k] != 1 {
			t.Fatalf("forward %d: hash %d obs %v", k, env.StateHash(), res.Obs)
		}
		if last := k == 19; res.Terminated != last || (res.Reward == 1) != last || res.Truncated {
			t.Fatalf("forward %d: %+v", k, res)
		}
	}
	// Backward from s_3 returns to s_2.
	env.Reset(0)
	mustStep(t, env, envs.NChainForward)
	mustStep(t, env, envs.NChainForward)
	mustStep(t, env, envs.NChainBackward)
	if env.StateHash() != 1 {
		t.Fatalf("s_1 -> s_3 -> back: hash %d, want 1", env.StateHash())
	}
}

func TestBlindCliffwalk(t *testing.T) {
	env, err := envs.NewBlindCliffwalk(envs.WithSize(4))
	if err != nil {
		t.Fatal(err)
	}
	if env.MaxEpisodeSteps() != 0 {
		t.Fatalf("limit %d, want none", env.MaxEpisodeSteps())
	}
	// All right actions: n steps, reward 1 on the last only.
	env.Reset(0)
	for s := range 4 {
		res := mustStep(t, env, env.Right(s))
		last := s == 3
		if res.Terminated != last || (res.Reward == 1) != last || res.Truncated {
			t.Fatalf("right at s_%d: %+v", s, res)
		}
	}
	if env.StateHash() != 4 {
		t.Fatalf("terminal hash %d, want 4", env.StateHash())
	}
	// A wrong action ends the episode with reward 0, in the same terminal
	// state.
	env.Reset(0)
	mustStep(t, env, env.Right(0))
	res := mustStep(t, env, 1-env.Right(1))
	if !res.Terminated || res.Reward != 0 || env.StateHash() != 4 || res.Obs[4] != 1 {
		t.Fatalf("wrong action: %+v hash %d", res, env.StateHash())
	}
	// The right action alternates.
	if env.Right(0) == env.Right(1) {
		t.Fatal("right action does not alternate")
	}
}

func TestKeyDoorFixedLayout(t *testing.T) {
	env, err := envs.NewKeyDoor()
	if err != nil {
		t.Fatal(err)
	}
	if env.MaxEpisodeSteps() != 360 {
		t.Fatalf("limit %d, want 360", env.MaxEpisodeSteps())
	}
	env.Reset(0)
	const start = "" +
		"######\n" +
		"#>.#.#\n" +
		"#..D.#\n" +
		"#..#.#\n" +
		"#K.#G#\n" +
		"######\n"
	if got := env.String(); got != start {
		t.Fatalf("layout:\n%swant:\n%s", got, start)
	}
	const (
		L = envs.KeyDoorLeft
		R = envs.KeyDoorRight
		F = envs.KeyDoorForward
		P = envs.KeyDoorPickup
		T = envs.KeyDoorToggle
	)
	// Walls and the locked door block; the key blocks; pickup and toggle
	// away from their objects do nothing.
	steps := []struct {
		a    int
		want string // the grid after the step ("" to skip)
	}{
		{L, ""}, {F, ""}, // facing north into the wall: no move
		{R, ""}, {P, ""}, {T, ""}, // facing east at an empty cell
		{F, "######\n#.>#.#\n#..D.#\n#..#.#\n#K.#G#\n######\n"},
		{F, "######\n#.>#.#\n#..D.#\n#..#.#\n#K.#G#\n######\n"}, // wall
		{R, ""}, {F, ""}, {L, ""}, // at (2,2) facing east, the locked door ahead
		{T, "######\n#..#.#\n#.>D.#\n#..#.#\n#K.#G#\n######\n"}, // no key: stays locked
		{F, "######\n#..#.#\n#.>D.#\n#..#.#\n#K.#G#\n######\n"}, // locked door blocks
		{R, ""}, {F, ""}, {F, ""}, {R, ""}, // (2,4) facing west, the key ahead
		{F, "######\n#..#.#\n#..D.#\n#..#.#\n#K<#G#\n######\n"}, // the key blocks
		{P, "######\n#..#.#\n#..D.#\n#..#.#\n#.<#G#\n######\nkey\n"},
		{P, "######\n#..#.#\n#..D.#\n#..#.#\n#.<#G#\n######\nkey\n"}, // nothing left
		{R, ""}, {F, ""}, {F, ""}, {R, ""}, // (2,2) facing east
		{T, "######\n#..#.#\n#.>/.#\n#..#.#\n#..#G#\n######\nkey\n"}, // unlocked and open
		{T, "######\n#..#.#\n#.>d.#\n#..#.#\n#..#G#\n######\nkey\n"}, // closed
		{F, "######\n#..#.#\n#.>d.#\n#..#.#\n#..#G#\n######\nkey\n"}, // closed door blocks
		{T, "######\n#..#.#\n#.>/.#\n#..#.#\n#..#G#\n######\nkey\n"}, // open again
		{F, "######\n#..#.#\n#..>.#\n#..#.#\n#..#G#\n######\nkey\n"}, // in the doorway
		{F, ""}, {R, ""}, {F, ""},
	}
	for k, s := range steps {
		res := mustStep(t, env, s.a)
		if res.Done() || res.Reward != -1 {
			t.Fatalf("step %d: %+v", k+1, res)
		}
		if s.want != "" && env.String() != s.want {
			t.Fatalf("step %d (action %d):\n%swant:\n%s", k+1, s.a, env.String(), s.want)
		}
	}
	res := mustStep(t, env, F)
	if !res.Terminated || res.Truncated || res.Reward != 360 {
		t.Fatalf("entering the goal: %+v", res)
	}
}

func TestKeyDoorOptions(t *testing.T) {
	env, err := envs.NewKeyDoor(envs.WithSize(5), envs.WithMaxSteps(50), envs.WithGoalReward(1))
	if err != nil {
		t.Fatal(err)
	}
	if env.Size() != 5 || env.MaxEpisodeSteps() != 50 || env.ObservationSpace().Dim() != 2*5+8 {
		t.Fatalf("size %d limit %d obs dim %d", env.Size(), env.MaxEpisodeSteps(), env.ObservationSpace().Dim())
	}
	env.Reset(0)
	// 5x5: agent (1,1) east, door (2,1) ahead, key (1,3), goal (3,3).
	for _, a := range []int{envs.KeyDoorRight, envs.KeyDoorForward, envs.KeyDoorPickup, envs.KeyDoorLeft, envs.KeyDoorLeft, envs.KeyDoorForward, envs.KeyDoorRight, envs.KeyDoorToggle, envs.KeyDoorForward, envs.KeyDoorForward, envs.KeyDoorRight, envs.KeyDoorForward} {
		mustStep(t, env, a)
	}
	if res := mustStep(t, env, envs.KeyDoorForward); !res.Terminated || res.Reward != 1 {
		t.Fatalf("goal: %+v\n%s", res, env)
	}
	// WithMaxSteps alone moves the default goal reward with it.
	env, _ = envs.NewKeyDoor(envs.WithMaxSteps(100))
	env.Reset(0)
	for _, a := range []int{1, 2, 2, 3, 0, 2, 0, 2, 1, 4, 2, 2, 1, 2} {
		mustStep(t, env, a)
	}
	if res := mustStep(t, env, 2); res.Reward != 100 {
		t.Fatalf("goal reward %v, want 100 (the time limit)", res.Reward)
	}
}

// TestKeyDoorRandomLayout checks the drawn layouts: the wall column and
// door row in Minigrid's ranges, agent and key distinct and left of the
// wall, every possibility reached.
func TestKeyDoorRandomLayout(t *testing.T) {
	const size = 7
	env, err := envs.Make("KeyDoor-Random", envs.WithSize(size))
	if err != nil {
		t.Fatal(err)
	}
	splits, doors := map[int]bool{}, map[int]bool{}
	for seed := range uint64(300) {
		env.Reset(seed)
		rows := strings.Split(strings.TrimSpace(env.(*envs.KeyDoor).String()), "\n")
		split, door, agentX, keyX := -1, -1, -1, -1
		for y, row := range rows {
			for x, c := range row {
				switch {
				case c == 'D':
					split, door = x, y
				case strings.ContainsRune("><v^", c):
					agentX = x
				case c == 'K':
					keyX = x
				}
			}
		}
		if split < 2 || split > size-3 || door < 1 || door > size-3 {
			t.Fatalf("seed %d: door at (%d, %d)\n%s", seed, split, door, strings.Join(rows, "\n"))
		}
		if agentX < 1 || agentX >= split || keyX < 1 || keyX >= split {
			t.Fatalf("seed %d: agent or key not left of the wall\n%s", seed, strings.Join(rows, "\n"))
		}
		splits[split], doors[door] = true, true
	}
	if len(splits) != size-4 || len(doors) != size-3 {
		t.Errorf("over 300 seeds: splits %v, door rows %v", splits, doors)
	}
}

// TestStateHash checks, over random episodes, that StateHash is equal iff
// the state is: for these environments the observation is an injective
// code of the state (with a random layout the layout is part of both), so
// hash equality must coincide with observation equality.
func TestStateHash(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []envs.Option
	}{
		{"NChain", []envs.Option{envs.WithSize(6)}},
		{"BlindCliffwalk", []envs.Option{envs.WithSize(6)}},
		{"KeyDoor", []envs.Option{envs.WithSize(5)}},
		{"KeyDoor-Random", []envs.Option{envs.WithSize(6)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := envs.Make(tc.name, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			h := env.(envs.StateHasher)
			byHash := map[uint64][]float64{}
			byObs := map[string]uint64{}
			check := func(obs []float64) {
				hash := h.StateHash()
				key := make([]byte, len(obs)) // one-hot codes: every value is 0 or 1
				for i, v := range obs {
					key[i] = byte(v)
				}
				if prev, ok := byHash[hash]; ok && !slices.Equal(prev, obs) {
					t.Fatalf("hash %#x for two states %v and %v", hash, prev, obs)
				}
				if prev, ok := byObs[string(key)]; ok && prev != hash {
					t.Fatalf("state %v has hashes %#x and %#x", obs, prev, hash)
				}
				if _, ok := byHash[hash]; !ok {
					byHash[hash] = slices.Clone(obs)
				}
				byObs[string(key)] = hash
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for seed := range uint64(100) {
				check(env.Reset(seed))
				for {
					res, err := env.Step(envs.Action{Index: rng.IntN(env.ActionSpace().(envs.Discrete).N)})
					if err != nil {
						t.Fatal(err)
					}
					check(res.Obs)
					if res.Done() {
						break
					}
				}
			}
			if len(byHash) < 5 {
				t.Errorf("only %d distinct states visited", len(byHash))
			}
			t.Logf("%d distinct states", len(byHash))
		})
	}
}

// TestKeyDoorHashPaths: the same state reached along different paths has
// the same hash; a state that differs only in the carried key or the door
// does not.
func TestKeyDoorHashPaths(t *testing.T) {
	env, _ := envs.NewKeyDoor()
	env.Reset(0)
	start := env.StateHash()
	for range 4 {
		mustStep(t, env, envs.KeyDoorLeft)
	}
	if env.StateHash() != start {
		t.Fatal("four left turns: hash changed")
	}
	mustStep(t, env, envs.KeyDoorRight)
	mustStep(t, env, envs.KeyDoorLeft)
	if env.StateHash() != start {
		t.Fatal("right then left: hash changed")
	}
	// Walk to the key, pick it up, come back to the start cell and direction.
	for _, a := range []int{1, 2, 2} {
		mustStep(t, env, a)
	}
	before := env.StateHash()
	mustStep(t, env, envs.KeyDoorPickup)
	if env.StateHash() == before {
		t.Fatal("picking up the key did not change the hash")
	}
	for _, a := range []int{0, 0, 2, 2, 1} {
		mustStep(t, env, a)
	}
	if env.StateHash() == start {
		t.Fatal("start cell with the key has the start's hash")
	}
}
