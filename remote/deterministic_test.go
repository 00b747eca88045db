package remote

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
)

// flushingSink inserts through a Writer and waits for the server's
// acknowledgement of every batch before it returns, so a lockstep run's
// next draw sees what was inserted before it, as in process.
type flushingSink struct {
	w   *Writer
	ctx context.Context
}

func (s flushingSink) Insert(t *buffer.Transitions) error {
	if err := s.w.Insert(t); err != nil {
		return err
	}
	return s.w.Flush(s.ctx)
}

// TestNetworkLockstepMatchesInProcess: a deterministic run (one actor and
// the learner in lockstep) whose inserts and whose learner's draws and
// write-backs all go through the network — a replay server built by
// runtime.NewReplayCore, an insert Writer, the client's remote stage —
// ends with exactly the learner parameters of the same configuration's
// run in one process (runtime.NewTrainer, Deterministic). The lockstep
// schedule alternates by a limiter of the server's configuration kept
// beside the learner (the server's own limiter admits the same
// operations, since they are serialized).
func TestNetworkLockstepMatchesInProcess(t *testing.T) {
	checkLeaks(t)
	for _, tc := range []struct{ env, method, algo string }{
		{"CartPole-v1", "per", ""}, {"CartPole-v1", "uniform", ""}, {"CartPole-v1", "rank", ""}, {"CartPole-v1", "ners", ""},
		// ReF-ER through the episode feed: V-RACER's controller follows
		// the server's stage.
		{"Pendulum-v1", "refer", "vracer"}, {"Pendulum-v1", "refer-2", "td3"},
	} {
		for _, pipe := range []bool{false, true} {
			lockstepMatches(t, tc.env, tc.method, tc.algo, pipe)
		}
	}
}

// lockstepMatches is TestNetworkLockstepMatchesInProcess for one method,
// with the remote stage pipelining its write-backs or not.
func lockstepMatches(t *testing.T, env, method, algo string, pipe bool) {
	tc := struct{ env, method, algo string }{env, method, algo}
	{
		const seed = 5
		cfg := runtime.TrainConfig{Env: tc.env, Sampler: method, Algo: tc.algo, Actors: 1, Deterministic: true, Steps: 250,
			Capacity: 4000, MinSizeToSample: 200, EvalEverySteps: 1 << 30, FinalEpisodes: 1, Seed: seed}
		if tc.env == "Pendulum-v1" {
			cfg.Batch, cfg.Steps = 32, 120
		}
		tr, err := runtime.NewTrainer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		want, err := tr.Policy()
		if err != nil {
			t.Fatal(err)
		}

		core, err := runtime.NewReplayCore(cfg)
		if err != nil {
			t.Fatal(err)
		}
		js, err := core.ConfigJSON()
		if err != nil {
			t.Fatal(err)
		}
		srv, err := NewServer(Table{Buffer: core.Buffer(), Method: core.Method(), Limiter: core.Limiter(), Config: js}, ServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bs := newBufServer(t, func(g *grpc.Server) { replayv1.RegisterReplayServer(g, srv) })
		c := bs.client(ClientOptions{CallTimeout: 30 * time.Second, Pipeline: pipe})
		ctx := context.Background()
		rcfg, err := c.Config(ctx)
		if err != nil {
			t.Fatal(err)
		}
		local, err := runtime.NewLocalMethod(rcfg)
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.Method(ctx, local, 0)
		if err != nil {
			t.Fatal(err)
		}
		lh, err := runtime.NewLearnerHost(rcfg, m, runtime.SeededRemotely())
		if err != nil {
			t.Fatal(err)
		}
		layout, err := runtime.ReplayLayout(rcfg)
		if err != nil {
			t.Fatal(err)
		}
		w, err := c.NewWriter("lockstep", WriterOptions{Layout: layout})
		if err != nil {
			t.Fatal(err)
		}
		ah, err := runtime.NewActorHost(rcfg, 1, lh.Store(), flushingSink{w, ctx})
		if err != nil {
			t.Fatal(err)
		}
		mirror, err := runtime.NewRateLimiter(core.Limiter().Config())
		if err != nil {
			t.Fatal(err)
		}
		var p runtime.Pipeline
		err = p.Run(ctx, flushingSink{w, ctx}, ah.Sources(), lh.Stepper(),
			runtime.PipelineConfig{LearnerBatch: lh.Batch(), Limiter: mirror, MaxSteps: cfg.Steps, Schedule: runtime.Lockstep})
		if cerr := w.Close(ctx); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		got, err := lh.Policy()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Params(), want.Params()) {
			t.Fatalf("%s (%s), seed %d: the network run's policy differs from the in-process run's (pipeline %t)", method, tc.algo, seed, pipe)
		}
		// Settled, the learner's and the client's write-back counts are
		// the server's exactly, pipelined or not.
		owed, err := Settle(m)
		if err != nil {
			t.Fatal(err)
		}
		if !pipe && owed != (buffer.UpdateResult{}) {
			t.Fatalf("%s: an unpipelined stage owes %+v", method, owed)
		}
		if pipe && tc.algo != "vracer" && owed.Applied+owed.Stale != lh.Batch() {
			t.Fatalf("%s: a pipelined stage owes %+v, not the last write-back's %d rows", method, owed, lh.Batch())
		}
		st := srv.Stats()
		ls, cs := lh.Stats().Learner, c.Stats()
		if ls.WriteBacks+uint64(owed.Applied) != st.WriteBacksApplied || ls.StaleWriteBacks+uint64(owed.Stale) != st.WriteBacksStale+st.WriteBacksWrongIncarnation ||
			cs.Applied != st.WriteBacksApplied || cs.Stale != st.WriteBacksStale+st.WriteBacksWrongIncarnation || cs.WriteBacksLost != 0 {
			t.Fatalf("%s (pipeline %t): the learner counts %d applied and %d stale (%+v owed), the client %+v, the server %d and %d",
				method, pipe, ls.WriteBacks, ls.StaleWriteBacks, owed, cs, st.WriteBacksApplied, st.WriteBacksStale+st.WriteBacksWrongIncarnation)
		}
		writesBack := tc.algo != "vracer" // V-RACER's write-back is its controller's, in the learner
		if st.Draws != uint64(cfg.Steps) || (st.WriteBacksApplied != 0) != writesBack || st.InsertedItems != uint64(p.Stats().Items) ||
			ah.Stats().EnvSteps != tr.Stats().EnvSteps {
			t.Fatalf("%s: server saw %d draws, %d write-backs applied, %d items (the pipeline inserted %d); the actor took %d env steps, the trainer's %d",
				method, st.Draws, st.WriteBacksApplied, st.InsertedItems, p.Stats().Items, ah.Stats().EnvSteps, tr.Stats().EnvSteps)
		}
		srv.Close()
	}
}
