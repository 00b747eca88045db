// Package runtime drives apex's pure core (buffer, sampler, model, envs,
// actor, learner): it owns the goroutines, channels, rate limiting,
// supervision, checkpoints and shutdown of an Ape-X run.
//
// It holds three layers, each usable on its own:
//
//   - RateLimiter: Reverb's SampleToInsertRatio semantics (samples per
//     insert kept within an error buffer, a minimum size before sampling).
//   - Pipeline: the Ape-X data flow. Actors (Sources) fill local batches
//     and send them through a bounded channel to one inserter; a learner
//     (a Stepper) steps against the buffer; the limiter paces both. Every
//     batch an actor handed over is stored on shutdown; nothing queues
//     without bound.
//   - Trainer: a whole training run built from a TrainConfig (an
//     environment, a replay method, a learner and its actors), with a
//     periodic greedy evaluator, stop rules (Steps, Duration, a target
//     return, the caller's context), periodic and final checkpoints, and
//     ResumeTrainer to continue a saved run exactly.
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
