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
//   - Impl.ToFloat32 and Impl.ToFloat64: the float64 ↔ float32
//     conversions at model's boundaries (AVX2, 8 values per pair of
//     instructions).
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
// # Plugging into model
//
// model.Config.Float32 and model.AdamConfig.Float32 (default off in model;
// on for the learner of apex train and runtime.DefaultTrainConfig)
// put model.Net and model.Adam on this package (model/float32.go): a Net
// holds one MLP per stream (the whole network, or a dueling trunk and its
// value and advantage streams, combined in float64), rounds its float64
// master parameters into them at every batch Forward with ToFloat32 and
// widens outputs and gradients back with ToFloat64; model.Adam's float32
// Step calls SumSq and AdamUpdate on float32 moments, which Save writes as
// float64. model.Loss, Polyak targets, snapshots and checkpoints stay
// float64. The learners need no change: they build their networks with
// the Config the caller gives them (only their own AdamConfig would need
// the option passed through to run Adam here).
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
