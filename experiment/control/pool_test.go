package control

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// TestPool: every job runs once and done follows each success, one call at
// a time; the first error stops the feed and is returned; a cancelled ctx
// is returned when no job failed.
func TestPool(t *testing.T) {
	const n = 40
	var ran [n]atomic.Int32
	var inDone atomic.Int32
	seen := map[int]bool{}
	err := Pool(context.Background(), 3, n, func(ctx context.Context, i int) error {
		ran[i].Add(1)
		return nil
	}, func(i int) {
		if inDone.Add(1) != 1 {
			t.Error("done called concurrently")
		}
		seen[i] = true
		inDone.Add(-1)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if ran[i].Load() != 1 || !seen[i] {
			t.Fatalf("job %d ran %d times, done called: %v", i, ran[i].Load(), seen[i])
		}
	}

	boom := errors.New("boom")
	var started atomic.Int32
	err = Pool(context.Background(), 2, n, func(ctx context.Context, i int) error {
		started.Add(1)
		switch {
		case i < 3:
			return nil
		case i == 3:
			return boom
		}
		<-ctx.Done() // later jobs wait for the failure to cancel them
		return nil
	}, nil)
	if !errors.Is(err, boom) {
		t.Fatalf("a failing job: Pool returned %v, want its error", err)
	}
	if s := started.Load(); s >= n {
		t.Fatalf("all %d jobs started after the failure", s)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Pool(ctx, 2, n, func(context.Context, int) error { return nil }, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled ctx: Pool returned %v", err)
	}
}
