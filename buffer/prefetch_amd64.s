#include "textflag.h"

// PREFETCHT0 asks for a line without waiting for it: unlike a load, it
// retires at once, so a pass of them does not hold the reorder buffer while
// the misses are served. Each function here is one pass over a whole list,
// so a batch costs one call, not one per line.

// func prefetchCol(base unsafe.Pointer, stride uintptr, slots []int32)
TEXT ·prefetchCol(SB), NOSPLIT, $0-40
	MOVQ base+0(FP), SI
	MOVQ stride+8(FP), DX
	MOVQ slots_base+16(FP), DI
	MOVQ slots_len+24(FP), CX
	TESTQ CX, CX
	JEQ coldone
colloop:
	MOVLQSX (DI), AX
	IMULQ DX, AX
	PREFETCHT0 (SI)(AX*1)
	ADDQ $4, DI
	DECQ CX
	JNE colloop
coldone:
	RET

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

// func prefetchLines(p unsafe.Pointer, n int)
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	TESTQ CX, CX
	JLE linesdone
linesloop:
	PREFETCHT0 0(AX)
	ADDQ $64, AX
	DECQ CX
	JNE linesloop
linesdone:
	RET
