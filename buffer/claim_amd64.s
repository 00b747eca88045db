//go:build !race

#include "textflag.h"

// func cas2(p *atomic.Uint64, old0, old1, new0, new1 uint64) (swapped bool)
//
// LOCK CMPXCHG16B: replaces the 16-byte-aligned pair p[0], p[1] with new0,
// new1 if it holds old0, old1, as one atomic operation.
TEXT ·cas2(SB), NOSPLIT, $0-41
	MOVQ p+0(FP), DI
	MOVQ old0+8(FP), AX
	MOVQ old1+16(FP), DX
	MOVQ new0+24(FP), BX
	MOVQ new1+32(FP), CX
	LOCK
	CMPXCHG16B (DI)
	SETEQ swapped+40(FP)
	RET
