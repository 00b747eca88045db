// Package remote holds the network adaptors of apex's replay: the replay
// stage served over gRPC (api/replay/v1) so actors on other hosts insert
// into it and a learner draws from it, with the same rows for the same
// seed as an in-process learner.
//
// Server side: the wire codec of a table's columns (EncodeTransitions,
// DecodeTransitions, EncodeBatch), keys (Key, RefOf: a stored item's slot
// and generation in one uint64), the Replay server (NewServer over a
// Table, NewGRPCServer with health, limits, TLS and token checks;
// GRPCServer.ServeHealth serves the health service alone in plaintext for
// probes that can do neither TLS nor tokens) and the learner's parameter
// service (NewParamsServer, NewParamsGRPCServer). Clients configure
// themselves in code: Dial turns off DNS service-config lookups. Servers
// and clients speak gRPC's protobuf wire format through apex's own codec,
// whose pooled buffers are not zeroed (gRPC's default clears a whole
// 1 MiB pool tier for every draw reply), with fixed HTTP/2 windows; Dial
// adds these, and embedders who dial with grpc.NewClient add
// WireDialOptions.
// Client side: Dial, the insert Writer (a runtime.Sink with a window of
// unacknowledged batches, resent after a break and stored once; a
// checkpoint's writer table, ReadWriterTable, keeps that across a
// restore, with the items and batches each writer id had stored, which
// Info's writer page reports for counting acknowledged inserts lost), the
// ShardedWriter over a fleet of shards (ResolveShards, DialShard,
// FleetConfig, and ShardTracker, which follows a shard of a multi-address
// DNS name to its new address when it restarts: a Writer per shard, episodes placed whole by rendezvous
// hashing of (writer, episode) over the live shards, a dead shard's window
// moved to the others and the shard taken back when it answers), the
// learner's remote stage (Client.Method: a sampler.Method whose Selector,
// Weighter, Features, Evaluated and, for the ReF-ER methods, Episodes
// go to the server; the ReF-ER controller follows the server stage's
// episodes through the episode feed on the Sample stream; with
// ClientOptions.Pipeline a write-back's result is read by the next draw,
// one round trip per learner step, and Settle returns the last one's
// counts), the learner's
// stage over a fleet (ShardedMethod: each batch drawn across the shards,
// exactly by their masses or one shard per batch, every row with the
// probability of the procedure run; write-backs routed to their shards;
// the fleet's sample-to-insert ratio on the fleet's counts, which carry a
// lease, renewed while the learner lives: a shard the learner no longer
// reaches stops holding inserts on them once it passes, up to its capacity
// past the ratio; dead shards left out and probed) and the actor hosts' ParamsSubscriber. cmd/apex's replay, learner and actor commands are
// built from these and the runtime's ReplayCore, LearnerHost and
// ActorHost.
//
// Checkpoints: Server.Checkpoint writes Table.Save's stream into a
// temporary file in the checkpoint folder, syncs it, renames it over the
// checkpoint and syncs the folder, so the file on disk is always a whole
// checkpoint and a crash mid-checkpoint leaves the previous one (a
// temporary file left by a crash is removed by the next Checkpoint). The
// server keeps serving meanwhile: Table.Save (runtime.ReplayCore's
// SaveStriped for apex replay) holds the stage's lock only to copy the
// stage's own state and the limiter's configuration and balance, then
// writes the buffer with buffer.Buffer.SaveStriped, which holds one stripe
// at a time for the copy of that stripe (inserts go to the other stripes,
// a write-back to it waits for that copy, draws go on). Consistency: each
// stripe is a consistent snapshot at its own instant; the stage state and
// the limiter's counts are taken before the first stripe (so the buffer
// holds every insert the limiter counted); the buffer's learner-side
// counters after the last. runtime.LoadReplayCoreWith reads it back and
// refuses a rate limiter configuration that differs from the flags'
// unless told which wins.
//
// Compatibility (writer table version 2): ServerOptions.Writers changed
// from map[string]uint64 to *WriterTable, ReadWriterTable returns one,
// and its file is written as version 2, which binaries from before it
// cannot read (see the writer table's comment in writer_table.go for a
// rollback); version-1 files still restore here.
//
// The package's pure parts (columns, keys) start no goroutines and
// allocate nothing per row; the server runs one goroutine per stream that
// gRPC hands it (plus one reader) and ends every one of them on shutdown;
// a Writer and a ParamsSubscriber each own one goroutine, ended by Close;
// a ShardedWriter owns two per shard (its writer's and a monitor), ended by
// Close; a ShardedMethod one per down shard while it is probed, ended by
// its context.
package remote
