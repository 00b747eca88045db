#include "textflag.h"

// PREFIX16(p) loads the 16 words at p into Y0..Y3, masks them with Y15,
// reads values negative as int64 as 0 (v &^= (0 > v); Y13 must be zero)
// and turns them into inclusive prefix sums (Y4..Y7 are scratch): inside
// each register, add the register shifted up one lane, then two lanes
// (across the 128-bit halves); then carry each register's total (its top
// lane) into the next.
#define PREFIX16(p) \
	VMOVDQU 0(p), Y0; \
	VMOVDQU 32(p), Y1; \
	VMOVDQU 64(p), Y2; \
	VMOVDQU 96(p), Y3; \
	VPAND Y15, Y0, Y0; \
	VPAND Y15, Y1, Y1; \
	VPAND Y15, Y2, Y2; \
	VPAND Y15, Y3, Y3; \
	VPCMPGTQ Y0, Y13, Y4; \
	VPANDN Y0, Y4, Y0; \
	VPCMPGTQ Y1, Y13, Y5; \
	VPANDN Y1, Y5, Y1; \
	VPCMPGTQ Y2, Y13, Y6; \
	VPANDN Y2, Y6, Y2; \
	VPCMPGTQ Y3, Y13, Y7; \
	VPANDN Y3, Y7, Y3; \
	VPERMQ $0x90, Y0, Y4; \
	VPBLENDD $0x03, Y13, Y4, Y4; \
	VPADDQ Y4, Y0, Y0; \
	VPERMQ $0x90, Y1, Y5; \
	VPBLENDD $0x03, Y13, Y5, Y5; \
	VPADDQ Y5, Y1, Y1; \
	VPERMQ $0x90, Y2, Y6; \
	VPBLENDD $0x03, Y13, Y6, Y6; \
	VPADDQ Y6, Y2, Y2; \
	VPERMQ $0x90, Y3, Y7; \
	VPBLENDD $0x03, Y13, Y7, Y7; \
	VPADDQ Y7, Y3, Y3; \
	VPERM2I128 $0x08, Y0, Y0, Y4; \
	VPADDQ Y4, Y0, Y0; \
	VPERM2I128 $0x08, Y1, Y1, Y5; \
	VPADDQ Y5, Y1, Y1; \
	VPERM2I128 $0x08, Y2, Y2, Y6; \
	VPADDQ Y6, Y2, Y2; \
	VPERM2I128 $0x08, Y3, Y3, Y7; \
	VPADDQ Y7, Y3, Y3; \
	VPERMQ $0xff, Y0, Y4; \
	VPADDQ Y4, Y1, Y1; \
	VPERMQ $0xff, Y1, Y5; \
	VPADDQ Y5, Y2, Y2; \
	VPERMQ $0xff, Y2, Y6; \
	VPADDQ Y6, Y3, Y3

// func scan16AVX2(grp *atomic.Uint64, u, mask uint64, pre *[16]uint64) (c uint64)
//
// Loads the 16 node values at grp, masks them, reads values that are negative
// as int64 as 0, writes their inclusive prefix sums to pre and returns how
// many prefixes are <= u. Prefixes are compared as signed integers: they
// stay below 2^63, the bound quantize.go keeps a stripe's mass under even
// when in-flight deltas count every leaf twice.
TEXT ·scan16AVX2(SB), NOSPLIT, $0-40
	MOVQ grp+0(FP), SI
	MOVQ pre+24(FP), DI
	MOVQ mask+16(FP), AX
	VMOVQ AX, X15
	VPBROADCASTQ X15, Y15
	MOVQ u+8(FP), AX
	VMOVQ AX, X14
	VPBROADCASTQ X14, Y14
	VPXOR Y13, Y13, Y13

	PREFIX16(SI)

	VMOVDQU Y0, 0(DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)

	// Lanes whose prefix exceeds u; c = 16 - their count.
	VPCMPGTQ Y14, Y0, Y0
	VPCMPGTQ Y14, Y1, Y1
	VPCMPGTQ Y14, Y2, Y2
	VPCMPGTQ Y14, Y3, Y3
	VMOVMSKPD Y0, AX
	VMOVMSKPD Y1, BX
	VMOVMSKPD Y2, CX
	VMOVMSKPD Y3, DX
	SHLQ $4, BX
	SHLQ $8, CX
	SHLQ $12, DX
	ORQ BX, AX
	ORQ CX, AX
	ORQ DX, AX
	POPCNTQ AX, AX
	MOVQ $16, BX
	SUBQ AX, BX
	MOVQ BX, c+32(FP)
	VZEROUPPER
	RET

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv0() (eax uint32)
TEXT ·xgetbv0(SB), NOSPLIT, $0-4
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	RET

// func scanRowsAVX2(lv *atomic.Uint64, base *int, mask uint64, rows *int32, n int, node *int32, u *uint64, vsel *uint64, word *uint64, pre *[17]uint64) (slow int)
//
// One level of the batched descent for rows[0:n], each on its own (rows may
// share a group): for row r it scans the 16 children at lv[base[r]:] (node
// node[r]'s group), as scan16AVX2 does, and moves the row into the child c
// holding u[r]: u[r] -= prefix before c, vsel[r] =
// child c's value, node[r] = node[r]*16 + c. With word non-nil (the leaf
// level) it also stores the chosen leaf's word in word[r]. A row whose
// target lies beyond its group's sum, or whose chosen leaf reads 0 (being
// written), is left unchanged and appended to rows[0:slow] for the caller's
// scalar path. pre is scratch: pre[0] is set to 0 and pre[1:] receives each
// group's prefix sums, so the prefix before child c is pre[c].
TEXT ·scanRowsAVX2(SB), NOSPLIT, $0-88
	MOVQ lv+0(FP), SI
	MOVQ base+8(FP), R8
	MOVQ mask+16(FP), AX
	VMOVQ AX, X15
	VPBROADCASTQ X15, Y15
	MOVQ rows+24(FP), R9
	MOVQ pre+72(FP), DX
	MOVQ $0, 0(DX)
	VPXOR Y13, Y13, Y13
	XORQ R10, R10
	XORQ DI, DI

rowloop:
	CMPQ R10, n+32(FP)
	JGE rowsdone
	MOVLQSX (R9)(R10*4), AX
	MOVQ (R8)(AX*8), BX
	LEAQ (SI)(BX*8), BX
	MOVQ node+40(FP), R12
	MOVLQSX (R12)(AX*4), R13

	PREFIX16(BX)

	VMOVDQU Y0, 8(DX)
	VMOVDQU Y1, 40(DX)
	VMOVDQU Y2, 72(DX)
	VMOVDQU Y3, 104(DX)

	// c = 16 - (number of prefixes > u): each compare lane is -1 or 0.
	MOVQ u+48(FP), R11
	MOVQ (R11)(AX*8), CX
	VMOVQ CX, X14
	VPBROADCASTQ X14, Y14
	VPCMPGTQ Y14, Y0, Y0
	VPCMPGTQ Y14, Y1, Y1
	VPCMPGTQ Y14, Y2, Y2
	VPCMPGTQ Y14, Y3, Y3
	VPADDQ Y1, Y0, Y0
	VPADDQ Y3, Y2, Y2
	VPADDQ Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDQ X1, X0, X0
	VMOVQ X0, CX
	ADDQ $16, CX
	CMPQ CX, $16
	JEQ rowslow

	MOVQ word+64(FP), R12
	TESTQ R12, R12
	JZ rowmove
	MOVQ (BX)(CX*8), BX
	MOVQ BX, R11
	ANDQ mask+16(FP), R11
	JZ rowslow
	MOVQ BX, (R12)(AX*8)

rowmove:
	MOVQ 0(DX)(CX*8), R11
	MOVQ 8(DX)(CX*8), R12
	SUBQ R11, R12
	MOVQ vsel+56(FP), BX
	MOVQ R12, (BX)(AX*8)
	MOVQ u+48(FP), BX
	SUBQ R11, (BX)(AX*8)
	SHLQ $4, R13
	ADDQ CX, R13
	MOVQ node+40(FP), BX
	MOVL R13, (BX)(AX*4)
	INCQ R10
	JMP rowloop

rowslow:
	MOVL AX, (R9)(DI*4)
	INCQ DI
	INCQ R10
	JMP rowloop

rowsdone:
	VZEROUPPER
	MOVQ DI, slow+80(FP)
	RET
