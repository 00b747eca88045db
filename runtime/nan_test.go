package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apexrl/apex/model"
)

// TestDivergenceStopsWithCheckpoint drives the learner into non-finite
// values with an absurd learning rate: the run must stop with an error that
// names the learner step, after writing the checkpoint.
func TestDivergenceStopsWithCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "diverged.ckpt")
	tr, err := NewTrainer(TrainConfig{Actors: 2, Steps: 2000, Capacity: 3000, MinSizeToSample: 200,
		LR: 1e200, EvalEvery: time.Hour, Checkpoint: path, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Run(context.Background())
	if err == nil {
		t.Fatal("a learning rate of 1e200 did not stop the run")
	}
	// The failed state goes beside the checkpoint path, never over it (a
	// resumed run writes back to the file it came from).
	if !errors.Is(err, model.ErrNonFinite) || !strings.Contains(err.Error(), "learner step") || !strings.Contains(err.Error(), "written to "+path+".failed") {
		t.Fatalf("error %q: want a non-finite error naming the learner step and the checkpoint", err)
	}
	if st, err := os.Stat(path + ".failed"); err != nil || st.Size() == 0 {
		t.Fatalf("checkpoint: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the failed run wrote over %s: %v", path, err)
	}
}
