// Package f32 holds float32 SIMD kernels for the learner's math and a
// float32 MLP training step built on them: the fast path that model's
// float64 Net, its losses and Adam are to run on (issue 16, item 1).
//
//   - Impl picks an implementation: AVX512 (amd64 assembly, zmm registers
//     and opmasks), AVX2 (amd64 assembly, ymm and FMA), or Portable (plain
//     Go, the twin the others are tested against and the only one on other
//     architectures or with the purego build tag). Auto, the zero value,
//     is Best(): decided once from the CPU's feature flags
//     (golang.org/x/sys/cpu), so one binary runs everywhere.
//   - Impl.Gemm: C = post(init + A·B) with A a strided view (row-major or
//     transposed), init zero, a bias row or C itself, and the epilogue
//     ReLU (forward) or ReLU's or tanh's derivative from the layer's output
//     (backward). The micro-kernel keeps a 4×64 (AVX-512, 16 zmm
//     accumulators) or 4×16 (AVX2, 8 ymm) tile of C in registers, with a
//     masked 4×32 (AVX-512) tile for the last columns. That suits this
//     package's sizes (64-wide layers, batches of 64–256) with no packing:
//     every operand of a 64×64 layer already sits in L1.
//   - Impl.ColSum (bias gradients), Impl.Transpose (Wᵀ for dX, 8×8
//     blocks), Impl.SumSq (the gradient norm), Impl.AdamUpdate (Adam's
//     moments and step fused in one pass, the clipping factor folded in,
//     subnormal moments flushed to zero) and Impl.Polyak (soft target
//     updates).
//   - MLP: Forward (one Gemm per layer, bias and ReLU fused; tanh and
//     softsign as Go loops after it; a narrow layer such as a Q head is
//     computed transposed, so its Gemm runs along the batch) and Backward / BackwardInput (dW =
//     xᵀ·dz, db, and dz of the layer below with ReLU's or tanh's
//     derivative fused into its Gemm; softsign's applied after). Loss:
//     Huber, MSE, L1 and PAL with per-row weights, Value and Selected.
//     Adam: model.Adam's update in float32, with model.Adam's checks.
//
// The package lives under model/internal so that only model (and its
// subpackages) can import it: model is where it plugs in, and its API can
// change with that wiring without breaking anyone.
//
// Like model, the package is pure: no goroutines, no clock, no global
// random source; an MLP and an Adam are not safe for concurrent use.
//
// # Usage
//
// The embedder's duties, as in model.Net's learner step:
//
//  1. Build the network with NewMLP(layers, Auto) and fill Params (the
//     layout of model.Net: per layer W row-major In×Out, then b), and the
//     optimizer with NewAdam(len(Params), cfg, Auto).
//  2. Each step: Forward(x), Loss.Selected(dq, q, actions, target, weight),
//     Backward(dq), Adam.Step(Params, Grads); stop on Step's error.
//  3. Keep the input of Forward unchanged until Backward returns.
//
// # Plugging into model (the next step, not done here)
//
// model.Net, the learners and the checkpoints stay float64 for now. The
// intended wiring, which keeps their APIs:
//
//  1. model.Dense gains a float32 shadow of its W, b and buffers and calls
//     Impl.Gemm instead of gonum, as MLP does: forward with InitBias and
//     PostReLU; backward dW with A = xᵀ (ars 1, aps In), ColSum for db,
//     Transpose for Wᵀ and dX with the layer below's derivative fused
//     (PostReLUGrad / PostTanhGrad, aux = that layer's output). Or
//     model.Net holds an MLP per stream outright: every activation and
//     the parameter layout match (model.Activation and model.LossKind
//     values convert by a cast). Dueling's combine and its backward are
//     O(B·A) Go loops over the streams' outputs, as today.
//  2. model.Net keeps Params() []float64 for snapshots and checkpoints, or
//     (cheaper) stores float32 and converts at Snapshot, Save and
//     SetParams: O(params) copies outside the step. Checkpoints keep their
//     float64 format, so existing ones stay loadable; a float32 net
//     converts on Load.
//  3. model.Adam gets a float32 path that calls Adam.Step's two kernels
//     (SumSq, AdamUpdate), with the moments converted on Save and Load;
//     Polyak replaces model.Polyak for float32 targets.
//  4. model.Loss dispatches float32 slices to Loss here.
//  5. The learners keep their code; TD3's policy gradient uses
//     BackwardInput as today.
//
// # Costs
//
// One DQN update of the 4→64→64→2 network (model's BenchmarkTrainStep32
// beside BenchmarkTrainStep; bench/BENCHMARKS.md has the figures and the
// numpy reference): on the 16-core device machine (Intel, AVX-512), with
// the final code, 19.8 µs at B=64 and 61 µs at B=256 with AVX-512 and
// 30.5 and 159 µs with AVX2. The float64 step took 238 µs and 1.39 ms in
// the same run, and numpy with OpenBLAS (float32, one thread) 164 and
// 299 µs on that machine. On the loaded 2-core development machine the
// earlier code took about 35 and 110 µs against 315 µs and 1.2 ms.
// The Portable twin is scalar Go, several times slower than gonum's float64
// kernels: it is the reference and the fallback, not a fast path.
package f32
