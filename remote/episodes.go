package remote

import (
	"errors"
	"fmt"
	"math"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
	"google.golang.org/grpc"
)

// episodes is the remote sampler.EpisodeSource of a table whose stage
// keeps whole episodes (the ReF-ER methods): the Method.Episodes that
// Client.Method returns, which a learner's REFERController observes as it
// observes the REFER stage in process.
//
// Observe subscribes the stage's Sample stream to the server's episode
// feed (ObserveEpisodes) and reports every stored episode to the observer
// at once; from then on each Sample reports, before it returns and in the
// order the server's stage produced them, the episodes that finished or
// were dropped since the previous one, the Indexed mark and the episodes
// its drawing dropped, then Sampled with the slots of the batch's keys:
// the calls an in-process REFER stage makes, so the controller's state is
// the same.
//
// A new stream (the old one broke, the server restarted, the feed was
// taken over by another stream) is subscribed again before its first
// draw: the observer first hears EpisodeDropped for every episode it
// holds, then EpisodeFinished for every stored one, so it starts over
// from the stage's contents with fresh per-step state (what a resumed
// learner gets), counted in ClientStats.EpisodeResyncs.
//
// Every method runs on the learner's goroutine, as the stage's calls do.
type episodes struct {
	s     *stage
	buf   *buffer.Buffer
	cfg   sampler.REFERConfig
	slots int

	obs sampler.EpisodeObserver
	// on is the stream the feed is subscribed on (nil: none); followed:
	// the observer has followed the feed on some stream.
	on       grpc.BidiStreamingClient[replayv1.SampleRequest, replayv1.SampleReply]
	followed bool
	req      replayv1.SampleRequest // the ObserveEpisodes request
	// live[h]: the observer was told episode h finished and not that it
	// was dropped.
	live []bool
	// The episode being assembled from its parts.
	part              sampler.Episode
	partLen           int
	inPart            bool
	partSlots         []uint32
	partRew, partDisc []float64
	rows              []uint32
	// The exchange under way: the request its events answer, and whether
	// the last message of an ObserveEpisodes answer came.
	expectID uint64
	sawLast  bool
}

var _ sampler.EpisodeSource = (*episodes)(nil)

// Buffer is the local twin's buffer: the table's layout, for the
// learner's batches.
func (e *episodes) Buffer() *buffer.Buffer { return e.buf }

// Slots is the server's table capacity (the slots the stage reports).
func (e *episodes) Slots() int { return e.slots }

// Config is the server's stage's ReF-ER configuration, defaults filled
// in (its MaxSteps is the server table's).
func (e *episodes) Config() sampler.REFERConfig { return e.cfg }

// Observe makes o the observer and reports every episode the server's
// stage stores to it now (one ObserveEpisodes exchange, O(stored steps)
// over the network). If the exchange fails, the next Sample subscribes
// again before it draws (and returns the error if that fails too). nil
// removes the observer: later events are read and discarded.
func (e *episodes) Observe(o sampler.EpisodeObserver) {
	e.obs = o
	e.on, e.followed = nil, false
	clear(e.live)
	if o == nil {
		return
	}
	_ = e.subscribe(false) // on failure e.on stays nil: the next Sample subscribes (and returns its error)
}

// subscribe makes the current (or a new) stream observe the feed, after
// telling the observer that every episode it holds is dropped; resync:
// the observer had followed the feed on an earlier stream (counted).
func (e *episodes) subscribe(resync bool) error {
	for h, ok := range e.live {
		if ok {
			e.live[h] = false
			e.obs.EpisodeDropped(int32(h))
		}
	}
	e.inPart = false
	s := e.s
	// A pipelined write-back's result comes ahead of the answer.
	if err := s.settle(); err != nil {
		return fmt.Errorf("remote: observe episodes: %w", s.withLost(err))
	}
	s.nextID++
	id := s.nextID
	e.req.Kind = &replayv1.SampleRequest_ObserveEpisodes{ObserveEpisodes: &replayv1.ObserveEpisodes{Table: s.table, Id: id}}
	e.expectID, e.sawLast = id, false
	reply, err := s.exchange(&e.req, s.c.opts.CallTimeout, nil, e.events)
	if err != nil {
		return fmt.Errorf("remote: observe episodes: %w", err)
	}
	if reply.GetEpisodes() == nil || !e.sawLast {
		return s.broken(fmt.Errorf("remote: observe episodes %d: the reply is %s", id, describe(reply)))
	}
	if e.inPart {
		return s.broken(fmt.Errorf("remote: observe episodes %d: the server's last message left an episode unfinished", id))
	}
	e.on = s.stream
	if resync {
		s.c.count(func(st *ClientStats) { st.EpisodeResyncs++ })
	}
	e.followed = true
	return nil
}

// beforeDraw readies the stream a draw of id is about to go out on:
// subscribed to the feed (if it is not yet), expecting the draw's events.
func (e *episodes) beforeDraw(id uint64) error {
	if e.obs != nil && (e.on == nil || e.on != e.s.stream) {
		if err := e.subscribe(e.followed); err != nil {
			return err
		}
	}
	e.expectID = id
	return nil
}

// events reports one EpisodeEvents message of the exchange under way to
// the observer; done when it was the last of an ObserveEpisodes answer.
func (e *episodes) events(m *replayv1.EpisodeEvents) (done bool, err error) {
	if m.GetId() != e.expectID {
		return false, fmt.Errorf("episode events for request %d, expected %d", m.GetId(), e.expectID)
	}
	for _, ev := range m.GetEvents() {
		if err := e.event(ev); err != nil {
			return false, err
		}
	}
	if m.GetLast() {
		e.sawLast = true
		return true, nil
	}
	return false, nil
}

// event reports one event.
func (e *episodes) event(ev *replayv1.EpisodeEvent) error {
	if p := ev.GetFinished(); p != nil {
		return e.finished(p)
	}
	if e.inPart {
		return errors.New("an episode's parts are interrupted by another event")
	}
	switch k := ev.GetKind().(type) {
	case *replayv1.EpisodeEvent_Dropped:
		h := k.Dropped
		if h < 0 || int(h) > e.slots {
			return fmt.Errorf("a dropped episode of handle %d (the table has %d slots)", h, e.slots)
		}
		if int(h) < len(e.live) {
			e.live[h] = false
		}
		if e.obs != nil {
			e.obs.EpisodeDropped(h)
		}
	case *replayv1.EpisodeEvent_Indexed:
		if e.obs != nil {
			e.obs.Indexed()
		}
	default:
		return errors.New("an episode event of no known kind")
	}
	return nil
}

// finished adds one part of a finished episode, reporting the episode
// once its last part arrived.
func (e *episodes) finished(p *replayv1.EpisodePart) error {
	n, first := int(p.GetLength()), int(p.GetFirstStep())
	k := len(p.GetSlots())
	switch {
	case p.GetHandle() < 0 || int(p.GetHandle()) > e.slots:
		return fmt.Errorf("a finished episode of handle %d (the table has %d slots)", p.GetHandle(), e.slots)
	case n < 1 || n > e.slots || k < 1 || first+k > n || len(p.GetReward()) != k || len(p.GetDiscount()) != k:
		return fmt.Errorf("a finished episode's part of %d steps from %d, %d rewards and %d discounts, for an episode of %d steps (the table has %d slots)",
			k, first, len(p.GetReward()), len(p.GetDiscount()), n, e.slots)
	case first == 0 && e.inPart:
		return errors.New("an episode's parts are interrupted by another episode")
	case first > 0 && (!e.inPart || p.GetHandle() != e.part.Handle || first != len(e.partSlots) || n != e.partLen):
		return fmt.Errorf("a part from step %d of episode handle %d out of order", first, p.GetHandle())
	}
	for _, s := range p.GetSlots() {
		if int(s) >= e.slots {
			return fmt.Errorf("a finished episode's step in slot %d (the table has %d slots)", s, e.slots)
		}
	}
	fin := func(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }
	for i := range k {
		if r, d := p.GetReward()[i], p.GetDiscount()[i]; !fin(r) || !fin(d) {
			return fmt.Errorf("%w: a finished episode's step %d has reward %v and discount %v", buffer.ErrNonFinite, first+i, r, d)
		}
	}
	if !fin(p.GetVboot()) {
		return fmt.Errorf("%w: a finished episode's V(s_T) is %v", buffer.ErrNonFinite, p.GetVboot())
	}
	if first == 0 {
		e.inPart, e.partLen = true, n
		e.part = sampler.Episode{Handle: p.GetHandle(), ID: p.GetEpisodeId(), Truncated: p.GetTruncated(), VBoot: float64(p.GetVboot())}
		e.partSlots, e.partRew, e.partDisc = e.partSlots[:0], e.partRew[:0], e.partDisc[:0]
	}
	e.partSlots = append(e.partSlots, p.GetSlots()...)
	for i := range k {
		e.partRew = append(e.partRew, float64(p.GetReward()[i]))
		e.partDisc = append(e.partDisc, float64(p.GetDiscount()[i]))
	}
	if len(e.partSlots) < n {
		return nil
	}
	e.inPart = false
	h := int(e.part.Handle)
	for len(e.live) <= h {
		e.live = append(e.live, false)
	}
	e.live[h] = true
	if e.obs != nil {
		e.part.Slots, e.part.Reward, e.part.Discount = e.partSlots, e.partRew, e.partDisc
		e.obs.EpisodeFinished(e.part)
	}
	return nil
}

// sampled reports the rows of the draw that just ended (refs: the
// batch's, nil when the draw failed).
func (e *episodes) sampled(refs []buffer.Ref) {
	if e.obs == nil {
		return
	}
	e.rows = e.rows[:0]
	for _, r := range refs {
		e.rows = append(e.rows, r.Slot)
	}
	e.obs.Sampled(e.rows)
}
