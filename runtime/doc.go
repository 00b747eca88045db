// Package runtime drives apex's pure core (buffer, sampler, model, envs,
// actor, learner): it owns the goroutines, channels, rate limiting,
// supervision, checkpoints and shutdown of an Ape-X run.
//
// It holds three layers, each usable on its own:
//
//   - RateLimiter: Reverb's SampleToInsertRatio semantics (samples per
//     insert kept within an error buffer, a minimum size before sampling).
//   - Pipeline: the engine. Actors (Sources) fill local batches, which are
//     inserted into the buffer; a learner (a Stepper) steps against it; the
//     limiter paces both; Tasks (evaluations, checkpoints) run beside
//     them. One insert operation and one step operation, and the
//     pipeline's counters, serve two schedules: Concurrent (Ape-X: every
//     part in its own goroutine) and Lockstep (one actor and the learner on
//     one goroutine, bit-for-bit repeatable). Every batch an actor
//     completed is stored on shutdown; nothing queues without bound.
//   - Trainer: a whole training run built from a TrainConfig. Agent
//     assembly (agent.go: per-algorithm networks, learner and actor
//     factory) builds the parts; Run hands them to one Pipeline with two
//     Tasks, the evaluator (periodic greedy evaluations, solved detection,
//     then the final evaluation) and the checkpointer; stop rules are
//     Steps, Duration, a target return and the caller's context;
//     ResumeTrainer continues a saved run exactly.
//   - The parts a run is assembled from, usable in one process or in
//     three (apex replay, apex learner, apex actor): ReplayCore (the
//     buffer, the replay method's whole stage and the rate limiter, from
//     the run's TrainConfig; Save and LoadReplayCore checkpoint them),
//     LearnerHost (the learner over a sampler.Method, the store it
//     publishes to, the evaluator and checkpointer Tasks, the stop rules;
//     Run is a learner-only Pipeline) and ActorHost (n actors reading a
//     store and inserting into a Sink; Run is an actor-only Pipeline).
//     A Trainer is one of each over one plan. Every run's learner samples
//     through sampler.Reseed, so a stage behind the network (sent the
//     learner's seed) draws the batches the in-process stage draws.
//
// # Goroutines, channels and shutdown
//
// The Concurrent schedule (Pipeline.Run; TrainConfig.Deterministic false),
// A actors, I inserters, a work channel of Q batches:
//
//	          ┌──── free (chan: A+Q+I batches, allocated once) ◄──── batch back after its insert ─────┐
//	          ▼                                                                                         │
//	actor i ─ Fill ─► work (chan, Q) ─► inserter j ─ ReserveInsert ─► gate.R ─► Insert ─► CommitInsert ┘
//	(A goroutines)    closed after the     (I goroutines)
//	                  last actor exits
//
//	learner ──────────── AwaitSample ─► gate.R ─► Stepper.Step (sample, learn, write back)
//	task "evaluator" ─── ticker(EvalEvery) ────── greedy episodes; target confirmed → stop the run
//	task "checkpointer"  ticker(CheckpointEvery)  gate.W (hold) ─► SaveCheckpoint
//
// With Inserters = Direct there is no work channel and no free list: each
// actor owns one batch and runs ReserveInsert ─► gate.R ─► Buffer.Insert ─►
// CommitInsert itself. Either way the limiter counts a reserved batch
// toward the ratio at once but toward MinSizeToSample only once it is
// stored, so the learner never starts on items a sample cannot see yet.
// The Lockstep schedule (Deterministic) runs the same operations on
// Run's goroutine: learner steps while the limiter admits samples, then
// one Fill and one insert, with the Tasks due (evaluator every
// EvalEverySteps steps, checkpointer every CheckpointEvery) run between
// two operations.
//
// With TrainConfig.LearnerWorkers W > 1 the learner's Step also runs on
// a WorkerPool: W − 1 helper goroutines that Trainer.Run starts before
// the Pipeline and stops after it has returned (the learner's step hands
// each helper one row shard through a one-slot channel and runs shard 0
// itself; nothing is spawned per step). The learner still sees one
// caller: the helpers run only inside its Step, on disjoint rows and
// their own gradient buffers, and the step reduces them in shard order.
//
// Shutdown order (Concurrent): the run's context ends (the caller's
// cancel, Duration, MaxSteps reached by the learner, a Task's stop, or any
// part's error through the errgroup) → actors return, counting a batch
// still being filled as Discarded (a completed batch waiting for room in
// work is handed over first, unless every inserter has failed) → the last
// actor's exit closes work →
// the inserters drain it, storing every accepted batch without waiting for
// the limiter → the learner's AwaitSample or Step returns → the tasks'
// tickers stop → Pipeline.Run returns the first error. Trainer.Run then
// runs the final evaluation and writes the last checkpoint.
//
// Who owns what:
//
//   - The Pipeline owns its goroutines, the work and free channels, the
//     batches in them (an actor owns a batch from free until it sends it;
//     an inserter from work until it returns it to free) and its counters:
//     only its insert, step and fill operations write them.
//   - The gate (an RWMutex) is held shared by every insert and learner
//     step, and by the Trainer's other writers of stage state (an
//     evaluation handed to NERS); exclusively only by a checkpoint, which
//     so sees the buffer, the learner and the limiter at rest.
//   - The buffer is safe for concurrent inserts, samples and write-backs;
//     the learner (Stepper) is driven by one goroutine at a time; each
//     actor (Source) by one goroutine; the RateLimiter is shared.
//   - The Trainer owns the Pipeline, the evaluator (its own environment
//     and network), the actors, the learner and the buffer; Stats, Policy,
//     Config and SaveCheckpoint may be called from any goroutine.
//
// # Inserters
//
// TrainConfig.Inserters (apex train -inserters) picks how batches reach
// the buffer: N inserter goroutines behind the bounded channel (0 means
// DefaultInserters, 1) or Direct (-inserters=direct: each actor calls
// Buffer.Insert, the buffer's lock-free multi-writer path). The default is
// one inserter because, with more actors than cores (Ape-X runs 64 on a
// 2-core machine), direct inserts never park the actors: they take the
// CPUs from the learner, whose rate is what a run is paced by. Through
// the channel the actors park on a full queue and only the inserter and
// the learner compete. BenchmarkPipelineInsert measures both: on the
// 2-core development machine (64 actors, a learner sampling 256 items and
// writing their priorities back, medians of 5 rounds) direct inserts
// stored 43 M items/s against 22.5 M for one inserter, but left the
// learner 0.30 M sampled items/s against 1.58 M (under heavy load from
// other processes: 4.6 M and 3.1 M items/s, 32 K and 318 K sampled/s); 2
// and 4 inserters matched one (22.9 M and 22.7 M, 1.56 M and 1.53 M).
// More inserters pay off only when one cannot keep up with the actors,
// which needs more cores than the learner and the actors' stepping use;
// the figures, and the command to rerun them on a larger machine (-cpu
// 1,2,4,8,16), are in bench/BENCHMARKS.md's "runtime inserters" section.
//
// # Usage
//
//	tr, err := runtime.NewTrainer(runtime.TrainConfig{Env: "CartPole-v1", Steps: 20_000,
//		Checkpoint: "out/checkpoint.apex", CheckpointEvery: time.Minute})
//	if err != nil { ... }                // every setting is checked here, before any work
//	res, err := tr.Run(ctx)              // once per Trainer
//	var ce *runtime.CheckpointError
//	if errors.As(err, &ce) && res != nil { ... } // trained; only the last checkpoint failed
//
// The embedder's duties:
//
//  1. Cancel the context given to Run to stop the run early (a signal,
//     say): the run then ends with StopReason StopInterrupted, its final
//     evaluation and its checkpoint, as any other end.
//  2. Record the TrainResult even when Run also returns a
//     *CheckpointError.
//  3. Give ResumeTrainer the Checkpoint the resumed run should write:
//     the path recorded in the file is never reused.
//  4. Read progress through Trainer.Stats (safe at any time); metrics
//     libraries stay outside this package.
//
// # Checkpoints
//
// A checkpoint holds the replay buffer, the learner (networks, optimizer
// state, step, RNG), a stateful stage's state (NERS), the rate limiter's
// balance and the run's counters and curve. SaveCheckpoint streams it to a
// temporary file in the target folder, syncs it and renames it over the
// target, so a crash leaves the previous checkpoint whole; it pauses the
// inserter and the learner for the save (actors keep stepping into the
// bounded queue) and needs memory of the order of the learner's
// parameters, not of the replay. A run killed without warning (SIGKILL,
// the OOM killer) loses at most CheckpointEvery of work. NewTrainer and
// ResumeTrainer check that the checkpoint's folder is writable and remove
// the temporary files crashed saves left behind.
package runtime
