package remote

import (
	"math/rand/v2"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"google.golang.org/grpc/codes"
)

// fleetStream is a Sample stream's state for positional draws (Draw.at)
// and tallies.
type fleetStream struct {
	pcg   *rand.PCG  // seeded from each positional draw's seed
	rng   *rand.Rand // over pcg
	mass  float64    // the latest draw's mass (Batch.mass)
	reply replayv1.Tallied
}

// checkFleetDraw refuses a Draw whose positions cannot be served, and
// installs the fleet's counts of one that carries them (before the draw
// samples: its rows are among the counted). Called before the limiter.
func (s *Server) checkFleetDraw(d *replayv1.Draw) error {
	if len(d.At) > 0 {
		if s.t.Method.Positional == nil {
			return s.reject(codes.FailedPrecondition, "remote: draw %d: positions given, but the stage %s cannot draw at positions (run the learner with -shard-sampling=one)", d.Id, s.t.Method.Selector)
		}
		if len(d.At) != int(d.Batch) {
			return s.reject(codes.InvalidArgument, "remote: draw %d: %d positions for a batch of %d", d.Id, len(d.At), d.Batch)
		}
	}
	return s.installFleet(d.Fleet)
}

// installFleet hands the limiter a fleet's counts (nothing for nil or a
// table without a limiter), with their lease: once it passes without a
// renewal the limiter admits the inserts the stale counts hold while the
// balance is within the table's capacity in items past the ratio's bound
// (runtime.RateLimiter.RenewFleetCounts; room only the learner's samples
// give back): at most a buffer's worth that the learner, when it is back,
// can still sample, not data thrown away unseen.
func (s *Server) installFleet(f *replayv1.FleetCounts) error {
	if f == nil || s.t.Limiter == nil {
		return nil
	}
	if f.Sampled > 1<<62 || f.OthersInserted > 1<<62 {
		return s.reject(codes.InvalidArgument, "remote: fleet counts out of range: %d sampled, %d inserted elsewhere", f.Sampled, f.OthersInserted)
	}
	lease := time.Duration(f.LeaseMs) * time.Millisecond
	if err := s.t.Limiter.RenewFleetCounts(int64(f.OthersInserted), int64(f.Sampled), lease, int64(s.t.Buffer.Capacity())); err != nil {
		return s.reject(codes.InvalidArgument, "remote: %v", err)
	}
	return nil
}

// sampleDraw fills b for draw d: at d's positions through the stage's
// Positional capability (a generator seeded from d's seed serves its
// fallbacks), or through the stream's Reseeder. It records the mass the
// rows are shares of in st.fleet.mass. Under the stage lock.
func (s *Server) sampleDraw(st *sampleStream, d *replayv1.Draw, b *buffer.Batch) error {
	m := &s.t.Method
	if len(d.At) == 0 {
		err := st.reseed.SampleSeed(d.Seed, b)
		st.fleet.mass = b.Total
		return err
	}
	f := &st.fleet
	if f.pcg == nil {
		f.pcg = rand.NewPCG(0, 0)
		f.rng = rand.New(f.pcg)
	}
	f.pcg.Seed(d.Seed, positionalStream)
	mass, err := m.Positional.SampleAt(f.rng, d.At, b)
	f.mass = mass
	return err
}

// positionalStream is the PCG stream a positional draw's generator is
// seeded with.
const positionalStream = 0x9051710a1

// limiterInserted is the limiter's own count of inserted items (0 without
// a limiter).
func (s *Server) limiterInserted() uint64 {
	if s.t.Limiter == nil {
		return 0
	}
	ins, _ := s.t.Limiter.Counts()
	return uint64(max(ins, 0))
}

// tally answers a Tally: installs its fleet counts and describes the
// table (limiter counts, the stage's mass, size, smallest probability).
// O(Stripes).
func (s *Server) tally(t *replayv1.Tally, st *sampleStream) (*replayv1.SampleReply, error) {
	if err := s.table(t.Table); err != nil {
		return nil, err
	}
	if err := s.installFleet(t.Fleet); err != nil {
		return nil, err
	}
	r := &st.fleet.reply
	*r = replayv1.Tallied{Id: t.Id, Incarnation: s.incarnation}
	if lim := s.t.Limiter; lim != nil {
		ins, smp := lim.Counts()
		r.Inserted, r.Sampled = uint64(max(ins, 0)), uint64(max(smp, 0))
	}
	b := s.t.Buffer
	r.Size = uint64(b.Size())
	if p := s.t.Method.Positional; p != nil {
		r.Mass = p.Mass()
	} else {
		r.Mass = b.TotalPriority()
	}
	if mp, ok := b.MinPriority(); ok {
		if total := b.TotalPriority(); total > 0 {
			r.MinProb = min(mp/total, 1)
		}
	}
	st.reply.Kind = &replayv1.SampleReply_Tallied{Tallied: r}
	return &st.reply, nil
}
