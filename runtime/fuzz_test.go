package runtime

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/apexrl/apex/checkpoint"
)

// splitCheckpoint splits a training checkpoint into its JSON header and
// the sections after the header's.
func splitCheckpoint(tb testing.TB, data []byte) (js, rest []byte) {
	tb.Helper()
	br := bytes.NewReader(data)
	r := checkpoint.NewReader(br)
	if _, err := r.Next(); err != nil {
		tb.Fatal(err)
	}
	p, err := io.ReadAll(r)
	if err != nil {
		tb.Fatal(err)
	}
	rest, _ = io.ReadAll(br)
	return p[4:], rest
}

// joinCheckpoint builds a training checkpoint from a header and sections,
// the header's checksums computed: mutations of the header get past them
// and reach the decoder and the trainer's checks.
func joinCheckpoint(js, rest []byte) []byte {
	var b bytes.Buffer
	checkpoint.Save(&b, ckKind, ckVersion, func(w io.Writer) error {
		_, err := w.Write(append(binary.LittleEndian.AppendUint32(nil, uint32(len(js))), js...))
		return err
	})
	return append(b.Bytes(), rest...)
}

// FuzzResumeTrainer feeds ResumeTrainer checkpoints whose header (the
// configuration, counters and curve) and sections the fuzzer mutates, the
// header's checksum recomputed. Seeds are real checkpoints of dqn, td3 and
// ners runs. Every input either resumes or fails with an error wrapping
// ErrCheckpoint or ErrResumeConflict, without a panic and without
// allocating far beyond what the file and the run it describes need.
func FuzzResumeTrainer(f *testing.F) {
	dir := f.TempDir()
	// Small buffers keep inputs small: the fuzzer's minimizer then takes
	// seconds, not minutes.
	for i, cfg := range []TrainConfig{
		{Actors: 1, Steps: 3, Capacity: 128, Batch: 8, MinSizeToSample: 64, Hidden: []int{4},
			EvalEvery: time.Hour, EvalEpisodes: 1, FinalEpisodes: 1, Seed: 3},
		{Env: "Pendulum-v1", Actors: 1, Steps: 3, Capacity: 128, Batch: 8, MinSizeToSample: 64, Hidden: []int{4},
			EvalEvery: time.Hour, EvalEpisodes: 1, FinalEpisodes: 1, Seed: 5},
		{Sampler: "ners", Actors: 1, Steps: 3, Capacity: 128, Batch: 8, MinSizeToSample: 64, Hidden: []int{4},
			EvalEvery: time.Hour, EvalEpisodes: 1, FinalEpisodes: 1, Seed: 7},
	} {
		cfg.Checkpoint = filepath.Join(dir, "seed.ckpt")
		tr, err := NewTrainer(cfg)
		if err != nil {
			f.Fatal(err)
		}
		if err := tr.SaveCheckpoint(cfg.Checkpoint); err != nil {
			f.Fatal(err)
		}
		data, err := os.ReadFile(cfg.Checkpoint)
		if err != nil {
			f.Fatal(err)
		}
		js, rest := splitCheckpoint(f, data)
		f.Add(js, rest)
		// Mutations a person would try: the counts behind the 2026 reports.
		for _, edit := range []func(*ckHeader){
			func(h *ckHeader) { h.Config.Actors = 1_000_000 },
			func(h *ckHeader) { h.Config.Hidden = []int{1 << 30, 1 << 30} },
			func(h *ckHeader) { h.Config.Capacity = 1 << 40 },
			func(h *ckHeader) { h.Config.FinalEpisodes = 1 << 40 },
			func(h *ckHeader) { h.Base.LearnerSteps = -1 },
			func(h *ckHeader) { h.Config.Env = "LQR-v0" },
		} {
			var h ckHeader
			if err := json.Unmarshal(js, &h); err != nil {
				f.Fatal(err)
			}
			edit(&h)
			ejs, err := json.Marshal(h)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(ejs, rest)
		}
		if i == 0 {
			f.Add(js, rest[:len(rest)/2])
		}
	}
	f.Fuzz(func(t *testing.T, js, rest []byte) {
		var h ckHeader
		if json.Unmarshal(js, &h) == nil && h.Config.Actors > 64 && h.Config.Actors <= MaxActors {
			// Valid: a run may ask for many actors, each with its network
			// and environment; the memory check bounds them, not the file.
			t.Skip("more than 64 actors")
		}
		data := joinCheckpoint(js, rest)
		path := filepath.Join(t.TempDir(), "fuzz.ckpt")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		tr, err := ResumeTrainer(path, nil)
		goruntime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64*uint64(len(data))+256<<20 {
			t.Fatalf("a %d-byte checkpoint made the loader allocate %d bytes", len(data), alloc)
		}
		if err != nil {
			if !errors.Is(err, ErrCheckpoint) && !errors.Is(err, ErrResumeConflict) && !strings.HasPrefix(err.Error(), "runtime: ") {
				t.Fatalf("error %v neither wraps ErrCheckpoint nor says it is the runtime's", err)
			}
			return
		}
		// A checkpoint that resumes saves again, and that resumes too.
		if err := tr.SaveCheckpoint(path); err != nil {
			t.Fatal(err)
		}
		if _, err := ResumeTrainer(path, nil); err != nil {
			t.Fatalf("a resumed checkpoint, saved again, does not resume: %v", err)
		}
	})
}

// TestResumeRefusesEditedHeader: a header edited with its checksum
// recomputed is refused with an error naming the field, before the run is
// built (1,000,000 actors used to end the process out of memory).
func TestResumeRefusesEditedHeader(t *testing.T) {
	_, _, data := savedRun(t, t.TempDir())
	js, rest := splitCheckpoint(t, data)
	for want, edit := range map[string]func(*ckHeader){
		"Actors (-actors) must be at most 16384": func(h *ckHeader) { h.Config.Actors = 1_000_000 },
		"widths must be in [1, 65536]":           func(h *ckHeader) { h.Config.Hidden = []int{1 << 30, 1 << 30} },
		"FinalEpisodes must be at most":          func(h *ckHeader) { h.Config.FinalEpisodes = 1 << 40 },
		"negative counters":                      func(h *ckHeader) { h.Base.LearnerSteps = -1 },
		"counters.seconds":                       func(h *ckHeader) { h.Base.Seconds = -3 },
		"does not fit":                           func(h *ckHeader) { h.Config.Capacity *= 2 },
		"negative rate limiter counts":           func(h *ckHeader) { h.Sampled = -5 },
		"LR (-lr) must not be negative, got -1":  func(h *ckHeader) { h.Config.LR = -1 },
	} {
		var h ckHeader
		if err := json.Unmarshal(js, &h); err != nil {
			t.Fatal(err)
		}
		edit(&h)
		ejs, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "edited.ckpt")
		if err := os.WriteFile(path, joinCheckpoint(ejs, rest), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ResumeTrainer(path, nil); !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want ErrCheckpoint mentioning %q", err, want)
		}
	}
}
