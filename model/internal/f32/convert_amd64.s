//go:build !purego

#include "textflag.h"

// Conversions between float64 and float32 vectors (convert.go), AVX2
// (VEX-encoded, so they run unchanged on AVX-512 CPUs): 8 values per
// iteration, rounded to nearest even under the default MXCSR as Go's
// float32() conversion is. n is a positive multiple of 8; convert.go
// converts the tail.

// func cvt64to32AVX2(dst *float32, src *float64, n int)
TEXT ·cvt64to32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

n32loop:
	VCVTPD2PSY (SI), X0
	VCVTPD2PSY 32(SI), X1
	VMOVUPS    X0, (DI)
	VMOVUPS    X1, 16(DI)
	ADDQ       $64, SI
	ADDQ       $32, DI
	SUBQ       $8, CX
	JNZ        n32loop
	VZEROUPPER
	RET

// func cvt32to64AVX2(dst *float64, src *float32, n int)
TEXT ·cvt32to64AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

w64loop:
	VCVTPS2PD (SI), Y0
	VCVTPS2PD 16(SI), Y1
	VMOVUPD   Y0, (DI)
	VMOVUPD   Y1, 32(DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	SUBQ      $8, CX
	JNZ       w64loop
	VZEROUPPER
	RET
