package control

import (
	"context"
	"sync"
)

// Pool runs job(ctx, i) for i = 0..n-1, in order of i, workers at a time.
// done(i), if not nil, is called after job i succeeded, one call at a time.
// Pool stops at ctx's end or at the first failed job (it then cancels the
// ctx the jobs get), having waited for the jobs in flight, and returns
// that job's error, or ctx's. Every goroutine it starts has ended when it
// returns.
func Pool(ctx context.Context, workers, n int, job func(ctx context.Context, i int) error, done func(i int)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range max(workers, 1) {
		wg.Go(func() {
			for i := range jobs {
				err := job(ctx, i)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					cancel()
				} else if done != nil {
					done(i)
				}
				mu.Unlock()
			}
		})
	}
feed:
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
