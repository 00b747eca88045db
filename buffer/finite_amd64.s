#include "textflag.h"

// func nonFiniteAVX2(v []float32) bool
//
// Reports whether any of v's values has an all-ones exponent (NaN or
// ±Inf), 8 values per step. len(v) must be a multiple of 8; the caller
// checks the tail.
TEXT ·nonFiniteAVX2(SB), NOSPLIT, $0-25
	MOVQ v_base+0(FP), SI
	MOVQ v_len+8(FP), CX
	MOVL $0x7f800000, AX
	VMOVQ AX, X0
	VPBROADCASTD X0, Y0
	VPXOR Y1, Y1, Y1
	SHRQ $3, CX
	JEQ done
loop:
	VMOVDQU (SI), Y2
	VPAND Y0, Y2, Y2
	VPCMPEQD Y0, Y2, Y2
	VPOR Y2, Y1, Y1
	ADDQ $32, SI
	DECQ CX
	JNE loop
done:
	VPTEST Y1, Y1
	SETNE ret+24(FP)
	VZEROUPPER
	RET
