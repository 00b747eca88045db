#include "textflag.h"

// PREFETCHT0 asks for a line without waiting for it: unlike a load, it
// retires at once, so a pass of them does not hold the reorder buffer while
// the misses are served.

// func prefetch(p unsafe.Pointer)
TEXT ·prefetch(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 0(AX)
	RET

// func prefetchGroup(p *atomic.Uint64)
TEXT ·prefetchGroup(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 0(AX)
	PREFETCHT0 64(AX)
	RET
