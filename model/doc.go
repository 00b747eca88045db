// Package model holds apex's function approximators: multilayer perceptrons
// with hand-written backpropagation over gonum's BLAS, the losses and
// optimizers a learner needs, target-network updates, immutable versioned
// parameter snapshots shared between the learner and its actors, and
// versioned checkpoints.
//
//   - Dense: a fully connected layer y = f(x·W + b) over a flat parameter
//     view; activations Identity, ReLU, Tanh, Softsign; Glorot uniform
//     initialization.
//   - Net: a stack of Dense layers (Config) with one flat parameter vector
//     and one flat gradient vector, an optional dueling head
//     (Q = V + A − mean(A), DuelingCombine / DuelingBackward), batched
//     Forward for the learner and a gemv path for one observation (actors),
//     Backward, and BackwardInput for gradients with respect to the input.
//   - Loss: per-sample weighted Huber (delta, default 1) and MSE, on all
//     outputs (Value) or on the taken actions only (Selected), returning
//     the loss and dL/doutput; Gather reads Q(s, a).
//   - Optimizer: Adam (bias-corrected, optional global-norm clipping) and
//     SGD; both refuse non-finite gradients without touching the network.
//   - Net.CopyFrom (hard target update), Net.SoftUpdate and Polyak (soft).
//   - Diagonal-Gaussian policy maths (gauss.go, ReF-ER's, shared by its
//     actors and learners): GaussianHead (the [V, mean, std parameters]
//     row of V-RACER's network), GaussStd (softplus + MinStd), the log
//     importance ratio GaussLogRatio, GaussKL in both directions and
//     their gradients.
//   - Params and Store: immutable versioned snapshots behind an
//     atomic.Pointer; the learner publishes, actors load without locks.
//   - Net.Save / LoadNet and Adam.Save / LoadAdam: versioned binary
//     checkpoints with a CRC-32C; damaged input, sizes the data does not
//     hold and NaN or infinite state are ErrCorrupt errors naming the
//     field, refused before anything of the declared size is allocated.
//   - CheckFinite, CheckFiniteValue, Net.CheckFinite: NaN/Inf detection as a
//     *NonFiniteError naming what and where.
//
// The package is pure: it starts no goroutines (matrix products are tiled
// so gonum never parallelizes them), reads no clock and uses no global
// random source (initialization takes a *rand.Rand). A Net, a Dense and an
// Adam are not safe for concurrent use; a Params is immutable and a Store
// is safe for any number of goroutines.
//
// # Usage
//
// A Double-DQN learner's duties:
//
//  1. Build the online network with NewNet(Config{In, Hidden, Out,
//     Dueling}, rng), the target network with Clone, and the optimizer
//     with NewAdam(net.NumParams(), AdamConfig{LR: ...}).
//  2. Each step, first the forwards whose outputs are only read: online
//     and target networks on the next observations (Double DQN: argmax
//     from one, value from the other); build the targets. Then the
//     training Forward on the observations, Loss.Selected (importance
//     weights from the sampler stage) into a dL/dQ buffer, Backward, and
//     Adam.Step(net.Params(), net.Grads()). Gather gives Q(s, a) for the TD
//     errors that become priorities.
//  3. Stop on errors: CheckFiniteValue("loss", l) and the error of Step
//     (fill in Where with net.Where(e.Index)) name the non-finite value.
//  4. Every few steps update the target network (CopyFrom, or SoftUpdate
//     with tau) and publish net.Snapshot(step) to the Store the actors
//     read.
//  5. Checkpoint with net.Save, target.Save and adam.Save; resume with
//     LoadNet and LoadAdam.
//
// An actor's duties: own a Net (NewNet(cfg, nil), or a Clone); every K
// environment steps Load the Store's current Params and, if its Version
// changed, SetParams; act with Argmax(net.Forward(obs)).
//
// A dueling Q network is Config{Dueling: true}: Hidden is then the shared
// trunk and StreamHidden the hidden widths of the value and advantage
// streams; Forward returns Q, so the learner treats it like any other Q
// network. An architecture Net does not cover is built from Dense layers
// over slices of one flat vector (DenseParams gives each layer's share),
// with DuelingCombine / DuelingBackward or the learner's own combination.
//
// # Costs
//
// Measured by bench_test.go for 4→64→64→2 (ReLU) on the 2-core
// development machine, pure Go (go test -run '^$' -bench . ./model):
// Forward at B=1 about 0.6 µs, at B=64 about 38 µs; a train step (forward,
// weighted Huber on the taken actions, backward, Adam with clipping) about
// 190 µs at B=64 and 0.8 ms at B=256; 0 allocations in all four. With
// -tags openblas: about 67 µs and 0.26 ms per train step. The GEMMs run at
// gonum's SSE2 kernel speed; a narrow layer (Out ≤ In/4, the Q head)
// multiplies through Wᵀ so its products run along In rather than making a
// kernel call per row of Out values.
//
// # Float32 path
//
// Config.Float32 and AdamConfig.Float32 (both default false here; the
// runtime's DefaultTrainConfig, so apex train, sets them for its learner)
// run a Net's batch Forward and Backward (B > 1) and Adam's Step on the
// float32 SIMD kernels of model/internal/f32 (AVX-512 or AVX2, picked
// from the CPU; a portable Go twin elsewhere) behind the same float64
// API: Params, Grads, snapshots and checkpoints stay float64 (the format
// is unchanged; the header records the option, so a float32 Net or Adam
// loads as one, and Adam.SetFloat32 switches a loaded optimizer's
// precision), the float64 parameters are the master copy rounded to
// float32 at every batch Forward, and a single row (an actor's Forward)
// is computed in float64 as without the option. Results agree with the
// float64 path to float32 precision, not bit for bit. Every float64
// boundary costs O(parameters) or O(rows) conversions (float32.go lists
// them); the 4→64→64→2 train step runs about ten times faster on an
// AVX-512 CPU (bench/BENCHMARKS.md). The losses stay float64: they are
// O(B) next to the network's O(B·parameters).
//
// # BLAS backend
//
// By default every product runs on gonum's pure-Go BLAS (SSE2 kernels) and
// the build needs no cgo. Building with -tags openblas (and Debian's
// libopenblas-dev installed) routes the whole program's blas64 calls to
// OpenBLAS through gonum.org/v1/netlib, single-threaded, which makes the
// learner step several times faster at large batches.
package model
