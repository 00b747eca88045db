package remote

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// Fetch returns the stored items keys name (see replay.proto): found[i]
// says whether keys[i] is still stored, and the found rows follow in key
// order. Keys of another incarnation are all not found. A request whose
// reply could exceed MaxMessageBytes is refused (InvalidArgument). Cost:
// one batch of len(keys) rows allocated, one GatherRef per key; safe
// concurrently with everything (the buffer's reads are).
func (s *Server) Fetch(ctx context.Context, req *replayv1.FetchRequest) (*replayv1.FetchReply, error) {
	if err := s.needDeadline(ctx, "Fetch"); err != nil {
		return nil, err
	}
	if err := s.table(req.Table); err != nil {
		return nil, err
	}
	k := len(req.Keys)
	if need := k*(RowBytes(s.cfg)+1) + 512; need > replayv1.MaxMessageBytes {
		return nil, s.reject(codes.InvalidArgument, "remote: fetch of %d keys could need %d bytes, above the %d-byte message limit (MaxMessageBytes): fetch at most %d",
			k, need, replayv1.MaxMessageBytes, (replayv1.MaxMessageBytes-512)/(RowBytes(s.cfg)+1))
	}
	reply := &replayv1.FetchReply{Incarnation: s.incarnation, Found: make([]bool, k), Data: &replayv1.Columns{}}
	b, err := s.t.Buffer.NewBatch(k)
	if err != nil {
		return nil, s.reject(codes.InvalidArgument, "remote: fetch: %v", err)
	}
	rows := 0
	if req.Incarnation == s.incarnation {
		for i, key := range req.Keys {
			if s.t.Buffer.GatherRef(b, rows, RefOf(key)) {
				reply.Found[i] = true
				rows++
			}
		}
	}
	if err := EncodeBatch(reply.Data, s.cfg, b, rows); err != nil {
		return nil, s.reject(codes.Internal, "remote: fetch: %v", err)
	}
	return reply, nil
}

// Watch streams the metadata of items as they are stored (see
// replay.proto): a buffer.Watcher of its own, polled with a backoff from
// 1 ms doubling up to WatchMaxBackoff while nothing new arrives, events
// of at most max_items items (0 or more than MaxWatchItems: MaxWatchItems).
// It ends when the client goes, its context ends or Close is called.
// Cost: the Watcher's (O(Stripes) per idle poll), plus one event's
// slices, reused.
func (s *Server) Watch(req *replayv1.WatchRequest, stream grpc.ServerStreamingServer[replayv1.WatchEvent]) error {
	if err := s.table(req.Table); err != nil {
		return err
	}
	s.c.watchStreams.Add(1)
	defer s.c.watchStreams.Add(-1)
	ctx, done := s.handlerCtx(stream.Context())
	defer done()
	maxItems := int(req.MaxItems)
	if maxItems <= 0 || maxItems > MaxWatchItems {
		maxItems = MaxWatchItems
	}
	w := s.t.Buffer.NewWatcher()
	ev := &replayv1.WatchEvent{Incarnation: s.incarnation}
	var sendErr error
	flush := func() {
		if sendErr == nil && len(ev.Keys) > 0 {
			ev.Lapped = w.Lapped()
			sendErr = stream.Send(ev)
		}
		ev.Keys, ev.Flags, ev.Action = ev.Keys[:0], ev.Flags[:0], ev.Action[:0]
		ev.StateHash, ev.NextStateHash = ev.StateHash[:0], ev.NextStateHash[:0]
		ev.EpisodeId, ev.EpisodeStep = ev.EpisodeId[:0], ev.EpisodeStep[:0]
	}
	visit := func(m buffer.Meta) {
		if sendErr != nil {
			return // the stream is gone: let Poll finish its walk
		}
		ev.Keys = append(ev.Keys, Key(m.Ref))
		ev.Flags = append(ev.Flags, m.Flags)
		ev.Action = append(ev.Action, m.Action)
		ev.StateHash = append(ev.StateHash, m.StateHash)
		ev.NextStateHash = append(ev.NextStateHash, m.NextStateHash)
		ev.EpisodeId = append(ev.EpisodeId, m.EpisodeID)
		ev.EpisodeStep = append(ev.EpisodeStep, m.EpisodeStep)
		if len(ev.Keys) == maxItems {
			flush()
		}
	}
	const minBackoff = time.Millisecond
	backoff := minBackoff
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-ctx.Done():
			return s.ctxErr(ctx)
		}
		n := w.Poll(visit)
		flush()
		if sendErr != nil {
			return sendErr
		}
		if n > 0 {
			backoff = minBackoff
		} else {
			backoff = min(2*backoff, s.opts.WatchMaxBackoff)
		}
		timer.Reset(backoff)
	}
}

// Evaluated hands the stage an evaluation's mean return (NERS's replay
// reward). FailedPrecondition for a stage without the hook,
// InvalidArgument for a non-finite return. Safe for concurrent use (the
// hook's contract).
func (s *Server) Evaluated(ctx context.Context, req *replayv1.EvaluatedRequest) (*replayv1.EvaluatedReply, error) {
	if err := s.needDeadline(ctx, "Evaluated"); err != nil {
		return nil, err
	}
	if err := s.table(req.Table); err != nil {
		return nil, err
	}
	if s.t.Method.Evaluated == nil {
		return nil, s.reject(codes.FailedPrecondition, "remote: evaluated: the stage %s takes no evaluation returns", s.t.Method.Selector)
	}
	if math.IsNaN(req.MeanReturn) || math.IsInf(req.MeanReturn, 0) {
		return nil, s.reject(codes.InvalidArgument, "remote: evaluated: mean return %v (must be finite)", req.MeanReturn)
	}
	if err := s.t.Method.Evaluated(req.MeanReturn); err != nil {
		return nil, s.reject(codes.InvalidArgument, "remote: evaluated: %v", err)
	}
	return &replayv1.EvaluatedReply{}, nil
}

// Info describes the server and its table. O(1) plus the method's Stats;
// with InfoRequest.writers, plus a page of the writer table (writerPage:
// O(writers log writers)).
func (s *Server) Info(ctx context.Context, req *replayv1.InfoRequest) (*replayv1.InfoReply, error) {
	if err := s.needDeadline(ctx, "Info"); err != nil {
		return nil, err
	}
	b := s.t.Buffer
	m := &s.t.Method
	ti := &replayv1.TableInfo{
		Name: s.t.Name, Method: m.String(), Capacity: uint64(b.Capacity()), Size: uint64(b.Size()),
		Total: b.TotalPriority(), MaxPriority: b.MaxPriority(), Limiter: s.limiterConfig(),
		Counters: s.wireCounters(), Features: m.Features != nil, Evaluated: m.Evaluated != nil,
		Episodes:   s.episodeConfig(),
		Positional: m.Positional != nil,
	}
	if m.Stats != nil {
		ti.MethodStats = m.Stats()
	}
	rep := &replayv1.InfoReply{Incarnation: s.incarnation, Lineage: s.lineage, Version: s.opts.Version, Config: s.t.Config,
		Tables: []*replayv1.TableInfo{ti}}
	if req.GetWriters() {
		rep.Writers = s.writerPage(req.GetWritersAfter(), int(req.GetMaxWriters()))
	}
	return rep, nil
}

// limiterConfig is the limiter's configuration in the wire's form (all
// zero without a limiter: no ratio limit).
func (s *Server) limiterConfig() *replayv1.LimiterConfig {
	if s.t.Limiter == nil {
		return &replayv1.LimiterConfig{}
	}
	c := s.t.Limiter.Config()
	return &replayv1.LimiterConfig{SamplesPerInsert: c.SamplesPerInsert, MinSizeToSample: uint64(c.MinSizeToSample), ErrorBuffer: c.ErrorBuffer}
}

// Checkpoint writes the table through Table.Save into a temporary file in
// CheckpointDir, syncs it, renames it over CheckpointFile and syncs the
// folder, so a crash or a failed Save leaves the previous checkpoint
// whole (the temporary file is removed on failure; one left by a crash
// is a dot-file that the next restore ignores and a later Checkpoint
// does not reuse). Inserts, draws and write-backs go on meanwhile: Save
// holds the stage only to copy its state and the limiter's balance, and
// each buffer stripe only to copy that stripe (see Table.Save and
// runtime.ReplayCore.SaveStriped for the consistency that gives). One
// checkpoint runs at a time. Beside the checkpoint it writes the writer
// table as it stood before the copy (WriterTableFile; a restore passes
// ReadWriterTable's result as ServerOptions.Writers, so resent batches
// the checkpoint holds are not stored again). The reply's items is the
// buffer's size when the file was complete. FailedPrecondition when the table has no Save
// or no folder, Internal when writing fails. Cost: Save's, O(buffer
// bytes) time, one stripe's copy of memory.
func (s *Server) Checkpoint(ctx context.Context, _ *replayv1.CheckpointRequest) (*replayv1.CheckpointReply, error) {
	if err := s.needDeadline(ctx, "Checkpoint"); err != nil {
		return nil, err
	}
	if s.t.Save == nil || s.t.CheckpointDir == "" {
		return nil, s.reject(codes.FailedPrecondition, "remote: checkpoint: the server was started without a checkpoint folder")
	}
	s.ckpt.Lock()
	defer s.ckpt.Unlock()
	path := filepath.Join(s.t.CheckpointDir, s.t.CheckpointFile)
	nbytes, items, err := s.writeCheckpoint(path)
	if err != nil {
		return nil, s.reject(codes.Internal, "remote: checkpoint %s: %v", path, err)
	}
	s.c.checkpoints.Add(1)
	return &replayv1.CheckpointReply{Path: path, Bytes: uint64(nbytes), Items: uint64(items)}, nil
}

// writeCheckpoint writes path atomically (see Checkpoint). Temporary
// files an earlier process left (it crashed mid-checkpoint) are removed
// first: one checkpoint runs at a time, so none of them is being written.
func (s *Server) writeCheckpoint(path string) (nbytes int64, items int, err error) {
	pattern := "." + filepath.Base(path) + ".tmp-*"
	for _, pat := range []string{pattern, "." + filepath.Base(WriterTableFile(path)) + ".tmp-*"} {
		if stale, gerr := filepath.Glob(filepath.Join(filepath.Dir(path), pat)); gerr == nil {
			for _, p := range stale {
				_ = os.Remove(p)
			}
		}
	}
	f, err := os.CreateTemp(filepath.Dir(path), pattern)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	// The writer table before the copy: every seq it covers is stored
	// (a batch in flight is not counted: its insert may end after its
	// stripe's copy).
	table := s.writerTable(false)
	cw := &countWriter{w: f}
	err = s.t.Save(cw, &s.stage)
	items = s.t.Buffer.Size()
	if err != nil {
		return 0, 0, err
	}
	// What was stored during the copy, or is still being recorded, is in
	// the checkpoint or not: its counts go beside, as uncertain
	// (writer_table.go).
	addCopied(table, s.writerTable(true))
	if err = f.Sync(); err != nil {
		return 0, 0, err
	}
	if err = f.Close(); err != nil {
		return 0, 0, err
	}
	// The old table goes first: it must never sit beside a newer
	// checkpoint than its own (writer_table.go).
	if rerr := os.Remove(WriterTableFile(path)); rerr != nil && !os.IsNotExist(rerr) {
		return 0, 0, rerr
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return 0, 0, err
	}

	if d, derr := os.Open(filepath.Dir(path)); derr == nil {
		derr = d.Sync()
		d.Close()
		if derr != nil {
			return cw.n, items, fmt.Errorf("syncing the folder: %w", derr)
		}
	}
	if werr := writeWriterTable(path, table); werr != nil {
		// The checkpoint is whole; a restore from it stores resent
		// batches again. Said, not hidden.
		return cw.n, items, werr
	}
	return cw.n, items, nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// SetLimiter changes the table's rate limiter (runtime.RateLimiter's
// SetConfig: counts kept, waiters re-checked; the Timeout stays). The new
// configuration is validated whole (InvalidArgument naming the field);
// a table without a limiter cannot get one, nor can a limited table drop
// its limit (samples_per_insert 0): both FailedPrecondition and
// InvalidArgument respectively. Returns the configuration in force.
func (s *Server) SetLimiter(ctx context.Context, req *replayv1.SetLimiterRequest) (*replayv1.LimiterConfig, error) {
	if err := s.needDeadline(ctx, "SetLimiter"); err != nil {
		return nil, err
	}
	if err := s.table(req.Table); err != nil {
		return nil, err
	}
	lim := s.t.Limiter
	if lim == nil {
		return nil, s.reject(codes.FailedPrecondition, "remote: set limiter: table %q was started without a rate limiter", s.t.Name)
	}
	l := req.Limiter
	switch {
	case l == nil:
		return nil, s.reject(codes.InvalidArgument, "remote: set limiter: no limiter configuration given")
	case l.SamplesPerInsert == 0:
		return nil, s.reject(codes.InvalidArgument, "remote: set limiter: samples_per_insert 0 (a table started with a limiter keeps one; give a ratio > 0)")
	case l.MinSizeToSample > math.MaxInt64:
		return nil, s.reject(codes.InvalidArgument, "remote: set limiter: min_size_to_sample %d is out of range", l.MinSizeToSample)
	}
	cfg := lim.Config()
	cfg.SamplesPerInsert, cfg.MinSizeToSample, cfg.ErrorBuffer = l.SamplesPerInsert, int64(l.MinSizeToSample), l.ErrorBuffer
	if err := lim.SetConfig(cfg); err != nil {
		return nil, s.reject(codes.InvalidArgument, "remote: set limiter: %v", err)
	}
	return s.limiterConfig(), nil
}
