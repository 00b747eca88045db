package bench

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/meter"
	"golang.org/x/sync/errgroup"
)

// backend is one replay implementation under test; B is its actors' batch
// type (each backend takes transitions in its own natural form: columns for
// apex, a slice of structs for the baseline).
type backend[B any] interface {
	// describe returns a Result with the backend's identity filled in.
	describe() Result
	// prefill fills every slot, with priorities from tab.
	prefill(tab *prioTable) error
	// newActorBatch allocates one actor batch of n transitions.
	newActorBatch(n int) B
	// fill writes a batch's transitions; seq numbers its first one.
	fill(b B, seq uint64)
	// insert stores a filled batch. Safe for concurrent use.
	insert(b B) error
	// newLearner returns a learner sampling batches of n with its own rng.
	newLearner(n int, seed uint64) (learner, error)
	// counters reads the backend's cumulative event counts.
	counters() counters
}

// learner runs learner steps. Not safe for concurrent use.
type learner interface {
	// step samples a batch and writes prios back for every sampled item;
	// it reports how many write-backs were applied and dropped as stale.
	step(prios []float64) (applied, stale int, err error)
}

// counters are a backend's cumulative event counts (see Result).
type counters struct {
	stale, torn, fallbacks uint64
}

// phase is what one timed phase measured.
type phase struct {
	wall    time.Duration // start of the phase to the last goroutine's exit
	learn   time.Duration // the learner loop's own run time
	inserts uint64
	steps   uint64 // successful learner steps
	failed  uint64 // learner steps whose Sample gave up (buffer.ErrRetries)
	applied uint64
	stale   uint64
	cpu     time.Duration // process CPU time over the phase (0 if unknown)
	mallocs uint64
	gcs     uint32
}

// measure fills be, runs its solo phase (if cfg.Solo) and its load phase,
// and returns the figures. When ctx ends it returns ctx's error with the
// figures measured so far: those of the phases that finished, and of the
// one it cut short, over the time that phase ran.
// name labels its progress lines.
func measure[B any](ctx context.Context, name string, be backend[B], cfg Config, tab *prioTable) (Result, error) {
	res := be.describe()
	cfg.say("%s: filling %d slots", name, cfg.Capacity)
	if err := be.prefill(tab); err != nil {
		return res, err
	}
	h := new(meter.Histogram)
	if cfg.Solo {
		cfg.say("%s: the learner alone for %v", name, cfg.soloDuration())
		p, err := runPhase(ctx, be, cfg, tab, h, false, cfg.soloDuration())
		res.SoloDurationSec = p.learn.Seconds()
		res.FailedLearnerSteps += p.failed
		res.SoloSamplesPerSec = rate(p.steps*uint64(cfg.LearnerBatch), p.learn)
		res.SoloLearnerStepP50US = us(h.Quantile(0.5))
		res.SoloLearnerStepP99US = us(h.Quantile(0.99))
		res.SoloLearnerStepP999US = us(h.Quantile(0.999))
		res.SoloLearnerStepMaxUS = us(h.Max())
		*h = meter.Histogram{}
		if err != nil {
			return res, err
		}
	}
	cfg.say("%s: the learner under the load of %d actors for %v", name, cfg.Actors, cfg.Duration)
	c0 := be.counters()
	p, err := runPhase(ctx, be, cfg, tab, h, true, cfg.Duration)
	c1 := be.counters()
	res.DurationSec = p.wall.Seconds()
	res.InsertsPerSec = rate(p.inserts, p.wall)
	res.SamplesPerSec = rate(p.steps*uint64(cfg.LearnerBatch), p.learn)
	res.UpdatesPerSec = rate(p.applied, p.learn)
	res.LearnerStepsPerSec = rate(p.steps, p.learn)
	res.LearnerSteps = p.steps
	res.FailedLearnerSteps += p.failed
	res.LearnerStepP50US = us(h.Quantile(0.5))
	res.LearnerStepP99US = us(h.Quantile(0.99))
	res.LearnerStepP999US = us(h.Quantile(0.999))
	res.LearnerStepMaxUS = us(h.Max())
	res.StaleUpdatesDropped = c1.stale - c0.stale
	res.TornReads = c1.torn - c0.torn
	res.StratumFallbacks = c1.fallbacks - c0.fallbacks
	if p.cpu > 0 && p.wall > 0 {
		res.CPUCores = p.cpu.Seconds() / p.wall.Seconds()
	}
	res.Mallocs, res.GCCycles = p.mallocs, p.gcs
	res.LoadToSolo = ratio(res.SamplesPerSec, res.SoloSamplesPerSec)
	return res, err
}

func rate(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// runPhase runs the learner for d, with the actors and inserters too when
// load is set, recording every learner step's duration in h. All the
// goroutines it starts have ended when it returns.
func runPhase[B any](ctx context.Context, be backend[B], cfg Config, tab *prioTable, h *meter.Histogram, load bool, d time.Duration) (phase, error) {
	var ph phase
	lr, lerr := be.newLearner(cfg.LearnerBatch, cfg.Seed)
	if lerr != nil {
		return ph, lerr
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6a09e667f3bcc909)) // priority windows

	// Everything the phase needs is allocated here, before timing.
	var free, work chan B
	var direct []B
	var inserted []uint64 // per inserter (or per actor when direct); each written by its owner at exit
	if load {
		if cfg.Inserters == 0 {
			direct = make([]B, cfg.Actors)
			for i := range direct {
				direct[i] = be.newActorBatch(cfg.Batch)
			}
			inserted = make([]uint64, cfg.Actors)
		} else {
			pool := cfg.Actors + cfg.Queue + cfg.Inserters // every batch that can exist at once
			free = make(chan B, pool)
			work = make(chan B, cfg.Queue)
			for range pool {
				free <- be.newActorBatch(cfg.Batch)
			}
			inserted = make([]uint64, cfg.Inserters)
		}
	}
	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := meter.ProcessCPU()

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(pctx)
	done := gctx.Done()
	start := make(chan struct{})
	wait := func() bool { // false if the phase ended before it started
		select {
		case <-start:
			return true
		case <-done:
			return false
		}
	}

	g.Go(func() error {
		if !wait() {
			return nil
		}
		t0 := time.Now()
		defer func() { ph.learn = time.Since(t0) }()
		for {
			select {
			case <-done:
				return nil
			default:
			}
			prios := tab.window(rng)
			s := time.Now()
			applied, stale, err := lr.step(prios)
			h.Record(time.Since(s))
			if errors.Is(err, buffer.ErrRetries) {
				ph.failed++ // a stratum kept meeting slots being overwritten
				continue
			}
			if err != nil {
				return err
			}
			ph.steps++
			ph.applied += uint64(applied)
			ph.stale += uint64(stale)
		}
	})

	batch := uint64(cfg.Batch)
	for a := range cfg.Actors {
		if !load {
			break
		}
		seq := uint64(a) << 40
		if cfg.Inserters == 0 {
			b := direct[a]
			g.Go(func() error {
				if !wait() {
					return nil
				}
				var n uint64
				defer func() { inserted[a] = n }()
				for {
					select {
					case <-done:
						return nil
					default:
					}
					be.fill(b, seq)
					seq += batch
					if err := be.insert(b); err != nil {
						return err
					}
					n += batch
				}
			})
			continue
		}
		g.Go(func() error {
			if !wait() {
				return nil
			}
			for {
				var b B
				select {
				case b = <-free:
				case <-done:
					return nil
				}
				be.fill(b, seq)
				seq += batch
				select {
				case work <- b:
				case <-done:
					return nil
				}
			}
		})
	}
	for i := range cfg.Inserters {
		if !load {
			break
		}
		g.Go(func() error {
			if !wait() {
				return nil
			}
			var n uint64
			defer func() { inserted[i] = n }()
			for {
				select {
				case b := <-work:
					if err := be.insert(b); err != nil {
						return err
					}
					n += batch
					free <- b // never blocks: free holds every batch
				case <-done:
					return nil
				}
			}
		})
	}

	t0 := time.Now()
	close(start)
	timer := time.AfterFunc(d, cancel)
	err := g.Wait()
	ph.wall = time.Since(t0)
	timer.Stop()

	ph.cpu = meter.ProcessCPU() - cpu0
	if cpu0 == 0 {
		ph.cpu = 0
	}
	runtime.ReadMemStats(&ms1)
	ph.mallocs = ms1.Mallocs - ms0.Mallocs
	ph.gcs = ms1.NumGC - ms0.NumGC
	for _, n := range inserted {
		ph.inserts += n
	}
	if err != nil {
		return ph, err
	}
	if err := ctx.Err(); err != nil {
		return ph, err
	}
	return ph, nil
}
