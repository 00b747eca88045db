package remote

import (
	"fmt"
	"math"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/sampler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// The episode feed: how a Sample stream follows a table's episode stage
// (Method.Episodes, the ReF-ER methods' REFER stage), whose learner-side
// controller (learner.REFERController) keeps per-step state over the
// stored episodes and hears, in process, of every episode that finishes
// or is dropped and of every Sample's rows (sampler.EpisodeObserver).
//
// The server is the stage's observer (episodeFeed). It records the
// stage's events for the one stream that subscribed (ObserveEpisodes),
// and that stream's draws carry them to the client ahead of their Batch,
// where the remote EpisodeSource (episodes.go) reports them to the
// controller in the same order, inside the learner's Sample: the
// controller sees exactly the calls it sees in process.

// Bytes the encoding of one EpisodeEvents message may take per step of a
// finished episode (slot varint ≤ 5, reward and discount 4 each), per
// event beside its steps (tags, handle, id, lengths, vboot), and in all
// (room for the message's own framing below MaxMessageBytes).
const (
	feedStepBytes   = 13
	feedEventBytes  = 64
	feedBudgetBytes = replayv1.MaxMessageBytes - 16<<10
)

// Kinds of a recorded event.
const (
	feedFinished uint8 = iota
	feedDropped
	feedIndexed
)

// feedEvent is one recorded event; a finished episode's steps are
// log.slots, log.rew and log.disc [off, off+n).
type feedEvent struct {
	kind      uint8
	truncated bool
	handle    int32
	id        uint64
	off, n    int
	vboot     float32
}

// feedLog is a sequence of recorded events, reused.
type feedLog struct {
	events    []feedEvent
	slots     []uint32
	rew, disc []float32
}

func (l *feedLog) reset() {
	l.events, l.slots, l.rew, l.disc = l.events[:0], l.slots[:0], l.rew[:0], l.disc[:0]
}

func (l *feedLog) empty() bool { return len(l.events) == 0 }

// episodeFeed is the server's observer of its table's episode stage. Every
// field is guarded by Server.stage: the stage reports its events inside
// Sample and Observe, which the server calls under that lock.
type episodeFeed struct {
	src sampler.EpisodeSource
	// attached: the feed is the stage's observer (from the first
	// subscription on; it then stays so, recording nothing while no
	// stream owns it).
	attached bool
	// owner is the subscribed stream (nil: none); drawer the stream whose
	// draw runs now.
	owner, drawer *sampleStream
	log           feedLog
	// limit bounds the log (steps, and events): a subscriber that falls
	// further behind loses the feed.
	limit int
}

var _ sampler.EpisodeObserver = (*episodeFeed)(nil)

// newEpisodeFeed returns the feed of src over a table of capacity slots.
func newEpisodeFeed(src sampler.EpisodeSource, capacity int) *episodeFeed {
	return &episodeFeed{src: src, limit: 2*capacity + 4096}
}

// EpisodeFinished records a finished episode (a copy of its steps).
func (f *episodeFeed) EpisodeFinished(e sampler.Episode) {
	if f.owner == nil {
		return
	}
	l := &f.log
	off := len(l.slots)
	l.slots = append(l.slots, e.Slots...)
	for t := range e.Slots {
		// The stage's values are float32 columns widened: exact in float32.
		l.rew = append(l.rew, float32(e.Reward[t]))
		l.disc = append(l.disc, float32(e.Discount[t]))
	}
	l.events = append(l.events, feedEvent{kind: feedFinished, handle: e.Handle, id: e.ID, off: off, n: len(e.Slots),
		truncated: e.Truncated, vboot: float32(e.VBoot)})
	f.checkLimit()
}

// EpisodeDropped records a dropped episode.
func (f *episodeFeed) EpisodeDropped(h int32) {
	if f.owner == nil {
		return
	}
	f.log.events = append(f.log.events, feedEvent{kind: feedDropped, handle: h})
	f.checkLimit()
}

// Indexed records the mark of the owner's own draw (another stream's
// draw indexes too, but its rows are not the owner's).
func (f *episodeFeed) Indexed() {
	if f.owner != nil && f.drawer == f.owner {
		f.log.events = append(f.log.events, feedEvent{kind: feedIndexed})
	}
}

// Sampled is not recorded: the Batch's keys are the rows.
func (f *episodeFeed) Sampled([]uint32) {}

// checkLimit takes the feed from an owner that fell too far behind.
func (f *episodeFeed) checkLimit() {
	if len(f.log.slots) > f.limit || len(f.log.events) > f.limit {
		f.owner.feedLost = fmt.Sprintf("it fell behind: more than %d steps of episode events piled up while other streams drew", f.limit)
		f.owner = nil
		f.log.reset()
	}
}

// observeEpisodes answers ObserveEpisodes: st becomes the feed's owner
// (displacing any other), and every stored episode is sent as finished.
func (s *Server) observeEpisodes(o *replayv1.ObserveEpisodes, st *sampleStream, stream grpc.BidiStreamingServer[replayv1.SampleRequest, replayv1.SampleReply]) error {
	if err := s.table(o.Table); err != nil {
		return err
	}
	f := s.feed
	if f == nil {
		return s.reject(codes.FailedPrecondition, "remote: observe episodes %d: the stage %s keeps no episodes (only the ReF-ER methods' does)", o.Id, s.t.Method.Selector)
	}
	s.stage.Lock()
	if f.owner != nil && f.owner != st {
		f.owner.feedLost = "another stream took the episode feed over (a second learner, or this learner's reconnect)"
		s.c.episodeFeedsLost.Add(1)
	}
	f.owner, st.observing, st.feedLost = st, true, ""
	f.log.reset()
	f.attached = true
	f.src.Observe(f) // reports every stored episode, oldest first
	st.feedOut, f.log = f.log, st.feedOut
	f.log.reset()
	s.stage.Unlock()
	s.c.episodeSubscriptions.Add(1)
	return s.sendFeed(stream, st, o.Id, true)
}

// feedBeforeDraw runs under the stage lock before st's draw: it refuses
// the draw of a stream that lost its feed, and marks st as the drawer.
func (s *Server) feedBeforeDraw(st *sampleStream, id uint64) error {
	f := s.feed
	if f == nil {
		return nil
	}
	if st.observing && f.owner != st {
		if st.feedLost == "" {
			st.feedLost = "the feed ended"
		}
		s.c.episodeFeedsLost.Add(1)
		return s.reject(codes.FailedPrecondition, "remote: draw %d: this stream's episode feed was lost (%s): open a new stream and observe the episodes again", id, st.feedLost)
	}
	f.drawer = st
	return nil
}

// feedAfterDraw runs under the stage lock after st's draw: the owner takes
// the events recorded up to now, to send ahead of its Batch.
func (s *Server) feedAfterDraw(st *sampleStream) {
	f := s.feed
	if f == nil {
		return
	}
	f.drawer = nil
	if f.owner == st {
		st.feedOut, f.log = f.log, st.feedOut
		f.log.reset()
	}
}

// unobserve ends st's ownership of the feed (its stream ended).
func (s *Server) unobserve(st *sampleStream) {
	if s.feed == nil || !st.observing {
		return
	}
	s.stage.Lock()
	if s.feed.owner == st {
		s.feed.owner = nil
		s.feed.log.reset()
	}
	s.stage.Unlock()
}

// sendFeed sends st's taken events as EpisodeEvents messages answering
// request id, each within feedBudgetBytes, splitting long episodes into
// parts; with last (an ObserveEpisodes) at least one message is sent and
// the final one is marked last. Allocates the messages (about one per
// event).
func (s *Server) sendFeed(stream grpc.BidiStreamingServer[replayv1.SampleRequest, replayv1.SampleReply], st *sampleStream, id uint64, last bool) error {
	l := &st.feedOut
	defer l.reset()
	if l.empty() && !last {
		return nil
	}
	msg := &replayv1.EpisodeEvents{Id: id, Incarnation: s.incarnation}
	size := feedEventBytes
	flush := func(final bool) error {
		msg.Last = final && last
		err := stream.Send(&replayv1.SampleReply{Kind: &replayv1.SampleReply_Episodes{Episodes: msg}})
		msg = &replayv1.EpisodeEvents{Id: id, Incarnation: s.incarnation}
		size = feedEventBytes
		return err
	}
	for _, e := range l.events {
		switch e.kind {
		case feedFinished:
			for done := 0; done < e.n; {
				room := (feedBudgetBytes - size - feedEventBytes) / feedStepBytes
				if room < 1 {
					if err := flush(false); err != nil {
						return err
					}
					continue
				}
				k := min(room, e.n-done)
				a, b := e.off+done, e.off+done+k
				msg.Events = append(msg.Events, &replayv1.EpisodeEvent{Kind: &replayv1.EpisodeEvent_Finished{Finished: &replayv1.EpisodePart{
					Handle: e.handle, EpisodeId: e.id, Length: uint32(e.n), FirstStep: uint32(done),
					Slots: l.slots[a:b], Reward: l.rew[a:b], Discount: l.disc[a:b], Truncated: e.truncated, Vboot: e.vboot}}})
				size += feedEventBytes + k*feedStepBytes
				done += k
			}
		case feedDropped, feedIndexed:
			if size+feedEventBytes > feedBudgetBytes {
				if err := flush(false); err != nil {
					return err
				}
			}
			ev := &replayv1.EpisodeEvent{Kind: &replayv1.EpisodeEvent_Dropped{Dropped: e.handle}}
			if e.kind == feedIndexed {
				ev.Kind = &replayv1.EpisodeEvent_Indexed{Indexed: true}
			}
			msg.Events = append(msg.Events, ev)
			size += feedEventBytes
		}
	}
	if len(msg.Events) > 0 || last {
		return flush(true)
	}
	return nil
}

// episodeConfig is the stage's ReF-ER configuration in the wire's form
// (nil for a stage without episodes).
func (s *Server) episodeConfig() *replayv1.EpisodeConfig {
	if s.feed == nil {
		return nil
	}
	return wireEpisodeConfig(s.feed.src.Config())
}

// wireEpisodeConfig is c in the wire's form.
func wireEpisodeConfig(c sampler.REFERConfig) *replayv1.EpisodeConfig {
	return &replayv1.EpisodeConfig{
		Variant: c.Variant.String(), C: c.C, D: c.D, A: c.A, TotalSteps: c.TotalSteps, MaxSteps: uint64(c.MaxSteps),
		BetaRate: c.BetaRate, Beta0: c.Beta0, RecountEvery: uint64(c.RecountEvery), RhoClip: c.RhoClip,
		NoRewardScale: c.NoRewardScale, NoRetrace: c.NoRetrace,
	}
}

// referConfig is the ReF-ER configuration w describes, validated.
func referConfig(w *replayv1.EpisodeConfig) (sampler.REFERConfig, error) {
	v := -1
	for i, n := range sampler.REFERMethods {
		if n == w.GetVariant() {
			v = i
		}
	}
	if v < 0 {
		return sampler.REFERConfig{}, fmt.Errorf("the server's episode stage has the unknown variant %q (known: %v)", w.GetVariant(), sampler.REFERMethods)
	}
	c := sampler.REFERConfig{
		Variant: sampler.REFERVariant(v), C: w.GetC(), D: w.GetD(), A: w.GetA(), TotalSteps: w.GetTotalSteps(),
		MaxSteps: int(min(w.GetMaxSteps(), math.MaxInt32)), BetaRate: w.GetBetaRate(), Beta0: w.GetBeta0(),
		RecountEvery: int(min(w.GetRecountEvery(), math.MaxInt32)), RhoClip: w.GetRhoClip(),
		NoRewardScale: w.GetNoRewardScale(), NoRetrace: w.GetNoRetrace(),
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("the server's episode stage configuration: %v", err)
	}
	if c.MaxSteps < 1 || c.RecountEvery < 1 || !(c.C > 0) || !(c.D > 0) || !(c.A > 0) || !(c.RhoClip > 1) {
		return c, fmt.Errorf("the server's episode stage configuration lacks its defaults: %+v", c)
	}
	return c, nil
}
