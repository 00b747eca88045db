// Package envs holds apex's environments behind one small interface, Env:
// Gymnasium's classic control tasks (CartPole-v1, Acrobot-v1,
// MountainCar-v0, MountainCarContinuous-v0, Pendulum-v1) with Gymnasium's
// published dynamics, constants and time limits, three discrete tasks for
// the replay papers (TER's NChain, PER's Blind Cliffwalk and a symbolic
// key-door grid, DoorKey-like), and LQR-v0, a one-dimensional
// linear-quadratic regulator whose optimal policy is known in closed form
// (LQRGain).
//
// The package depends on the standard library only. It starts no
// goroutines and reads no clock; all randomness comes from a per-instance
// math/rand/v2 PCG generator that Reset reseeds, so an episode is a pure
// function of (seed, actions).
//
// # Usage
//
//	env, err := envs.Make("CartPole-v1")
//	if err != nil { ... } // unknown names list the registered ones
//	obs := env.Reset(seed)
//	for {
//		res, err := env.Step(envs.Action{Index: policy(obs)})
//		if err != nil { ... } // invalid action, or Step after the end
//		... store (obs, action, res.Reward, res.Obs, res.Terminated) ...
//		if res.Done() {
//			break
//		}
//		obs = res.Obs
//	}
//
// The embedder's duties:
//
//  1. One Env per goroutine: an Env is not safe for concurrent use. Make
//     is cheap.
//  2. Pass a seed to every Reset; derive it from the actor's own seeded
//     generator to replay a run exactly.
//  3. Keep Terminated and Truncated apart: a terminated step has value 0
//     (no bootstrap); a truncated one hit the time limit and bootstraps
//     from res.Obs. They are never both true.
//  4. Call Reset after a step with Done(): Step then fails with
//     ErrNeedsReset.
//  5. Send actions in the action space. Discrete environments reject an
//     out-of-range Index (ErrInvalidAction); they are never clipped. The
//     continuous tasks (Pendulum-v1, MountainCarContinuous-v0, LQR-v0)
//     clip a finite out-of-range value (the first two exactly as
//     Gymnasium does), and reject NaN, ±Inf and vectors of the wrong
//     length.
//
// # Observations
//
// Observations are []float64 owned by the caller (a fresh slice per
// Reset and Step). The dynamics run in float64 as in Gymnasium, and the
// observation holds the exact float64 values (the state, or the cosines
// and sines of its angles); Gymnasium returns a float32 copy of the same
// values, which is what float32(x) at the replay buffer (float32 storage)
// yields too. The golden tests (testdata/gen_golden.py, an
// independent numpy transcription) pin every environment's trajectories
// to 1e-9.
//
// # Discrete states
//
// NChain, BlindCliffwalk and KeyDoor implement StateHasher: StateHash is an
// exact, collision-free code of the current state, for samplers that build
// graphs over states (TER).
//
// # Costs
//
// Reset and Step are O(1) for the classic control tasks and LQR-v0, and
// O(size of the observation) for the one-hot discrete tasks; each
// allocates one observation slice. ObservationSpace and a Box ActionSpace
// return copies.
package envs
