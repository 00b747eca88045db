package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apexlearner "github.com/apexrl/apex/learner"
	"github.com/apexrl/apex/model"
)

// TestRunLearnerCells: RunLearner measures every learner of LearnerNames
// (DQN at its batch 64, TD3 and SAC at 256) in float64 and float32, at
// each GOMAXPROCS and worker count, each cell with steps taken; the SAC
// learner is built on the default SAC networks; the table has a row and a
// float32/float64 line for each learner.
func TestRunLearnerCells(t *testing.T) {
	const seed = 3
	rep, err := RunLearner(context.Background(), LearnerConfig{Duration: 15 * time.Millisecond, Procs: []int{1}, Workers: []int{1, 2},
		Rows: 1024, Seed: seed})
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, fmt.Sprintf("%s/%s/W=%d/B=%d", r.Learner, r.Precision, r.Workers, r.Batch))
		if r.Steps <= 0 || !(r.UpdatesPerSec > 0) || r.Procs != 1 {
			t.Errorf("seed %d: %+v: no steps measured", seed, r)
		}
	}
	var want []string
	for _, l := range LearnerNames {
		batch := map[string]int{"dqn": apexlearner.DefaultBatch, "td3": apexlearner.DefaultTD3Batch, "sac": apexlearner.DefaultSACBatch}[l]
		for _, p := range []string{"float64", "float32"} {
			for _, w := range []int{1, 2} {
				want = append(want, fmt.Sprintf("%s/%s/W=%d/B=%d", l, p, w, batch))
			}
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("seed %d: cells %v, want %v", seed, got, want)
	}
	var sb strings.Builder
	if err := rep.WriteText(&sb); err != nil {
		t.Fatal(err)
	}
	for _, l := range LearnerNames {
		if !strings.Contains(sb.String(), fmt.Sprintf("%-4s float32 B=", l)) || !strings.Contains(sb.String(), fmt.Sprintf("%-4s float32/float64:", l)) {
			t.Errorf("the table has no %s rows:\n%s", l, sb.String())
		}
	}
}

// TestBenchSACLearner: the SAC cell's learner is SAC with its defaults on
// the default SAC networks (policy 3→64→64→2: the action's mean and log
// std), in the precision asked.
func TestBenchSACLearner(t *testing.T) {
	for _, f32 := range []bool{false, true} {
		bl, err := newBenchLearner("sac", f32, LearnerConfig{Rows: 512, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if bl.batch != apexlearner.DefaultSACBatch || bl.setWorkers == nil {
			t.Fatalf("float32 %t: batch %d, data-parallel %t", f32, bl.batch, bl.setWorkers != nil)
		}
		l, ok := bl.impl.(*apexlearner.SAC)
		if !ok {
			t.Fatalf("float32 %t: the sac cell's learner is a %T", f32, bl.impl)
		}
		wantPol := apexlearner.SACPolicyConfig(3, 1, []int{64, 64})
		wantPol.Float32 = f32
		wantCritic := model.Config{In: 4, Hidden: []int{64, 64}, Out: 1, Float32: f32}
		for _, c := range []struct{ got, want model.Config }{{l.Policy().Config(), wantPol}, {l.Critics()[0].Config(), wantCritic}} {
			want, err := c.want.Validate() // the defaults filled in, as the network's Config reports them
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(c.got) != fmt.Sprint(want) {
				t.Errorf("float32 %t: network %+v, want %+v", f32, c.got, c.want)
			}
		}
		if err := bl.step(context.Background()); err != nil {
			t.Fatalf("float32 %t: %v", f32, err)
		}
	}
}
