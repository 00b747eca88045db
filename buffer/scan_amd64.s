#include "textflag.h"

// func scan16AVX2(grp *atomic.Uint64, u, mask uint64, pre *[16]uint64) (c uint64)
//
// Loads the 16 node values at grp, masks them, reads values that are negative
// as int64 as 0, writes their inclusive prefix sums to pre and returns how
// many prefixes are <= u. Prefixes are compared as signed integers: every
// value the tree holds is below 2^62 (quantize.go).
TEXT ·scan16AVX2(SB), NOSPLIT, $0-40
	MOVQ grp+0(FP), SI
	MOVQ pre+24(FP), DI
	MOVQ mask+16(FP), AX
	MOVQ AX, X15
	VPBROADCASTQ X15, Y15
	MOVQ u+8(FP), AX
	MOVQ AX, X14
	VPBROADCASTQ X14, Y14
	VPXOR Y13, Y13, Y13

	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VPAND Y15, Y0, Y0
	VPAND Y15, Y1, Y1
	VPAND Y15, Y2, Y2
	VPAND Y15, Y3, Y3

	// Negative (as int64) reads as 0: v &^= (0 > v).
	VPCMPGTQ Y0, Y13, Y4
	VPANDN Y0, Y4, Y0
	VPCMPGTQ Y1, Y13, Y5
	VPANDN Y1, Y5, Y1
	VPCMPGTQ Y2, Y13, Y6
	VPANDN Y2, Y6, Y2
	VPCMPGTQ Y3, Y13, Y7
	VPANDN Y3, Y7, Y3

	// Prefix sums inside each register: x += x shifted up one lane, then
	// two lanes.
	VPERMQ $0x90, Y0, Y4
	VPBLENDD $0x03, Y13, Y4, Y4
	VPADDQ Y4, Y0, Y0
	VPERMQ $0x90, Y1, Y5
	VPBLENDD $0x03, Y13, Y5, Y5
	VPADDQ Y5, Y1, Y1
	VPERMQ $0x90, Y2, Y6
	VPBLENDD $0x03, Y13, Y6, Y6
	VPADDQ Y6, Y2, Y2
	VPERMQ $0x90, Y3, Y7
	VPBLENDD $0x03, Y13, Y7, Y7
	VPADDQ Y7, Y3, Y3

	VPERM2I128 $0x08, Y0, Y0, Y4
	VPADDQ Y4, Y0, Y0
	VPERM2I128 $0x08, Y1, Y1, Y5
	VPADDQ Y5, Y1, Y1
	VPERM2I128 $0x08, Y2, Y2, Y6
	VPADDQ Y6, Y2, Y2
	VPERM2I128 $0x08, Y3, Y3, Y7
	VPADDQ Y7, Y3, Y3

	// Carry each register's total into the next.
	VPERMQ $0xff, Y0, Y4
	VPADDQ Y4, Y1, Y1
	VPERMQ $0xff, Y1, Y5
	VPADDQ Y5, Y2, Y2
	VPERMQ $0xff, Y2, Y6
	VPADDQ Y6, Y3, Y3

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
