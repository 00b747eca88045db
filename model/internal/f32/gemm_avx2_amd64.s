//go:build !purego

#include "textflag.h"

// AVX2+FMA kernels: the same contracts as the AVX-512 ones in
// gemm_avx512_amd64.s, on 8-lane ymm registers. Column tails use
// VMASKMOVPS with lane masks read from f32mask: 16 words of all ones, then
// 16 of zeros, so the 8 words starting at word 16−r hold r ones first
// (VMASKMOVPS does not touch, or fault on, the masked-off lanes).

DATA f32mask<>+0(SB)/4, $0xffffffff
DATA f32mask<>+4(SB)/4, $0xffffffff
DATA f32mask<>+8(SB)/4, $0xffffffff
DATA f32mask<>+12(SB)/4, $0xffffffff
DATA f32mask<>+16(SB)/4, $0xffffffff
DATA f32mask<>+20(SB)/4, $0xffffffff
DATA f32mask<>+24(SB)/4, $0xffffffff
DATA f32mask<>+28(SB)/4, $0xffffffff
DATA f32mask<>+32(SB)/4, $0xffffffff
DATA f32mask<>+36(SB)/4, $0xffffffff
DATA f32mask<>+40(SB)/4, $0xffffffff
DATA f32mask<>+44(SB)/4, $0xffffffff
DATA f32mask<>+48(SB)/4, $0xffffffff
DATA f32mask<>+52(SB)/4, $0xffffffff
DATA f32mask<>+56(SB)/4, $0xffffffff
DATA f32mask<>+60(SB)/4, $0xffffffff
DATA f32mask<>+64(SB)/4, $0x00000000
DATA f32mask<>+68(SB)/4, $0x00000000
DATA f32mask<>+72(SB)/4, $0x00000000
DATA f32mask<>+76(SB)/4, $0x00000000
DATA f32mask<>+80(SB)/4, $0x00000000
DATA f32mask<>+84(SB)/4, $0x00000000
DATA f32mask<>+88(SB)/4, $0x00000000
DATA f32mask<>+92(SB)/4, $0x00000000
DATA f32mask<>+96(SB)/4, $0x00000000
DATA f32mask<>+100(SB)/4, $0x00000000
DATA f32mask<>+104(SB)/4, $0x00000000
DATA f32mask<>+108(SB)/4, $0x00000000
DATA f32mask<>+112(SB)/4, $0x00000000
DATA f32mask<>+116(SB)/4, $0x00000000
DATA f32mask<>+120(SB)/4, $0x00000000
DATA f32mask<>+124(SB)/4, $0x00000000
GLOBL f32mask<>(SB), RODATA|NOPTR, $128

DATA f32one2<>+0(SB)/4, $0x3f800000
GLOBL f32one2<>(SB), RODATA|NOPTR, $4

// func gemm4AVX2(k int, a *float32, ars, aps int, b *float32, ldb int, c *float32, ldc int, n int, bias, aux *float32, mode int)
//
// See gemm4AVX512. Register tile: 4 rows × 16 columns = 8 ymm accumulators
// (Y0–Y7), 2 loads of B and 4 broadcasts of A per k step; Y14/Y15 hold the
// masks of the chunk's two 8-column halves.
TEXT ·gemm4AVX2(SB), NOSPLIT, $0-96
	MOVQ ars+16(FP), BX
	SHLQ $2, BX
	LEAQ (BX)(BX*2), CX
	MOVQ aps+24(FP), DX
	SHLQ $2, DX
	MOVQ ldb+40(FP), DI
	SHLQ $2, DI
	MOVQ ldc+56(FP), R9
	SHLQ $2, R9
	XORQ R10, R10

chunk:
	MOVQ n+64(FP), R14
	SUBQ R10, R14
	JLE  done
	MOVQ $16, R11
	CMPQ R14, R11
	CMOVQGT R11, R14           // R14 = min(left, 16)
	MOVQ $16, R11
	SUBQ R14, R11              // first mask word: 16 − R14
	LEAQ f32mask<>(SB), R13
	VMOVUPS (R13)(R11*4), Y14
	VMOVUPS 32(R13)(R11*4), Y15

	MOVQ c+48(FP), R8
	LEAQ (R8)(R10*4), R8
	LEAQ (R8)(R9*2), R12

	MOVQ mode+88(FP), R11
	ANDQ $3, R11
	CMPQ R11, $1
	JEQ  initbias
	CMPQ R11, $2
	JEQ  initacc
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	JMP  kloop0

initbias:
	MOVQ bias+72(FP), R11
	LEAQ (R11)(R10*4), R11
	VMASKMOVPS (R11), Y14, Y0
	VMASKMOVPS 32(R11), Y15, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y1, Y3
	VMOVAPS Y0, Y4
	VMOVAPS Y1, Y5
	VMOVAPS Y0, Y6
	VMOVAPS Y1, Y7
	JMP  kloop0

initacc:
	VMASKMOVPS (R8), Y14, Y0
	VMASKMOVPS 32(R8), Y15, Y1
	VMASKMOVPS (R8)(R9*1), Y14, Y2
	VMASKMOVPS 32(R8)(R9*1), Y15, Y3
	VMASKMOVPS (R12), Y14, Y4
	VMASKMOVPS 32(R12), Y15, Y5
	VMASKMOVPS (R12)(R9*1), Y14, Y6
	VMASKMOVPS 32(R12)(R9*1), Y15, Y7

kloop0:
	MOVQ a+8(FP), AX
	MOVQ b+32(FP), SI
	LEAQ (SI)(R10*4), SI
	MOVQ k+0(FP), R11
	TESTQ R11, R11
	JLE  post

kloop:
	VMASKMOVPS (SI), Y14, Y8
	VMASKMOVPS 32(SI), Y15, Y9
	VBROADCASTSS (AX), Y10
	VBROADCASTSS (AX)(BX*1), Y11
	VBROADCASTSS (AX)(BX*2), Y12
	VBROADCASTSS (AX)(CX*1), Y13
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y10, Y1
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y9, Y11, Y3
	VFMADD231PS Y8, Y12, Y4
	VFMADD231PS Y9, Y12, Y5
	VFMADD231PS Y8, Y13, Y6
	VFMADD231PS Y9, Y13, Y7
	ADDQ DX, AX
	ADDQ DI, SI
	DECQ R11
	JNZ  kloop

post:
	VXORPS Y10, Y10, Y10       // Y10 = 0
	MOVQ mode+88(FP), R11
	SHRQ $2, R11
	CMPQ R11, $1
	JEQ  postrelu
	CMPQ R11, $2
	JEQ  postrelugrad
	CMPQ R11, $3
	JEQ  posttanhgrad
	JMP  store

postrelu:
	VMAXPS Y0, Y10, Y0
	VMAXPS Y1, Y10, Y1
	VMAXPS Y2, Y10, Y2
	VMAXPS Y3, Y10, Y3
	VMAXPS Y4, Y10, Y4
	VMAXPS Y5, Y10, Y5
	VMAXPS Y6, Y10, Y6
	VMAXPS Y7, Y10, Y7
	JMP  store

postrelugrad:
	MOVQ aux+80(FP), R13
	LEAQ (R13)(R10*4), R13
	LEAQ (R13)(R9*2), R11
	VMASKMOVPS (R13), Y14, Y8
	VCMPPS $14, Y10, Y8, Y8    // Y8 = aux > 0 ? all ones : 0
	VANDPS Y8, Y0, Y0
	VMASKMOVPS 32(R13), Y15, Y8
	VCMPPS $14, Y10, Y8, Y8
	VANDPS Y8, Y1, Y1
	VMASKMOVPS (R13)(R9*1), Y14, Y8
	VCMPPS $14, Y10, Y8, Y8
	VANDPS Y8, Y2, Y2
	VMASKMOVPS 32(R13)(R9*1), Y15, Y8
	VCMPPS $14, Y10, Y8, Y8
	VANDPS Y8, Y3, Y3
	VMASKMOVPS (R11), Y14, Y8
	VCMPPS $14, Y10, Y8, Y8
	VANDPS Y8, Y4, Y4
	VMASKMOVPS 32(R11), Y15, Y8
	VCMPPS $14, Y10, Y8, Y8
	VANDPS Y8, Y5, Y5
	VMASKMOVPS (R11)(R9*1), Y14, Y8
	VCMPPS $14, Y10, Y8, Y8
	VANDPS Y8, Y6, Y6
	VMASKMOVPS 32(R11)(R9*1), Y15, Y8
	VCMPPS $14, Y10, Y8, Y8
	VANDPS Y8, Y7, Y7
	JMP  store

posttanhgrad:
	MOVQ aux+80(FP), R13
	LEAQ (R13)(R10*4), R13
	LEAQ (R13)(R9*2), R11
	VBROADCASTSS f32one2<>(SB), Y11
	VMASKMOVPS (R13), Y14, Y8
	VMOVAPS Y11, Y9
	VFNMADD231PS Y8, Y8, Y9    // Y9 = 1 − aux²
	VMULPS Y9, Y0, Y0
	VMASKMOVPS 32(R13), Y15, Y8
	VMOVAPS Y11, Y9
	VFNMADD231PS Y8, Y8, Y9
	VMULPS Y9, Y1, Y1
	VMASKMOVPS (R13)(R9*1), Y14, Y8
	VMOVAPS Y11, Y9
	VFNMADD231PS Y8, Y8, Y9
	VMULPS Y9, Y2, Y2
	VMASKMOVPS 32(R13)(R9*1), Y15, Y8
	VMOVAPS Y11, Y9
	VFNMADD231PS Y8, Y8, Y9
	VMULPS Y9, Y3, Y3
	VMASKMOVPS (R11), Y14, Y8
	VMOVAPS Y11, Y9
	VFNMADD231PS Y8, Y8, Y9
	VMULPS Y9, Y4, Y4
	VMASKMOVPS 32(R11), Y15, Y8
	VMOVAPS Y11, Y9
	VFNMADD231PS Y8, Y8, Y9
	VMULPS Y9, Y5, Y5
	VMASKMOVPS (R11)(R9*1), Y14, Y8
	VMOVAPS Y11, Y9
	VFNMADD231PS Y8, Y8, Y9
	VMULPS Y9, Y6, Y6
	VMASKMOVPS 32(R11)(R9*1), Y15, Y8
	VMOVAPS Y11, Y9
	VFNMADD231PS Y8, Y8, Y9
	VMULPS Y9, Y7, Y7

store:
	VMASKMOVPS Y0, Y14, (R8)
	VMASKMOVPS Y1, Y15, 32(R8)
	VMASKMOVPS Y2, Y14, (R8)(R9*1)
	VMASKMOVPS Y3, Y15, 32(R8)(R9*1)
	VMASKMOVPS Y4, Y14, (R12)
	VMASKMOVPS Y5, Y15, 32(R12)
	VMASKMOVPS Y6, Y14, (R12)(R9*1)
	VMASKMOVPS Y7, Y15, 32(R12)(R9*1)
	ADDQ $16, R10
	JMP  chunk

done:
	VZEROUPPER
	RET

// func colSumAVX2(dst, src *float32, rows, n, ld int)
//
// See colSumAVX512: chunks of 16 columns, even and odd rows in separate
// accumulators.
TEXT ·colSumAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ ld+32(FP), R9
	SHLQ $2, R9
	XORQ R10, R10

cschunk:
	MOVQ n+24(FP), R14
	SUBQ R10, R14
	JLE  csdone
	MOVQ $16, R11
	CMPQ R14, R11
	CMOVQGT R11, R14
	MOVQ $16, R11
	SUBQ R14, R11
	LEAQ f32mask<>(SB), R13
	VMOVUPS (R13)(R11*4), Y14
	VMOVUPS 32(R13)(R11*4), Y15
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ src+8(FP), SI
	LEAQ (SI)(R10*4), SI
	MOVQ rows+16(FP), R11

csloop2:
	CMPQ R11, $2
	JLT  csloop1
	VMASKMOVPS (SI), Y14, Y4
	VMASKMOVPS 32(SI), Y15, Y5
	VMASKMOVPS (SI)(R9*1), Y14, Y6
	VMASKMOVPS 32(SI)(R9*1), Y15, Y7
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	LEAQ (SI)(R9*2), SI
	SUBQ $2, R11
	JMP  csloop2

csloop1:
	TESTQ R11, R11
	JLE  csstore
	VMASKMOVPS (SI), Y14, Y4
	VMASKMOVPS 32(SI), Y15, Y5
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1

csstore:
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	LEAQ (DI)(R10*4), R12
	VMASKMOVPS Y0, Y14, (R12)
	VMASKMOVPS Y1, Y15, 32(R12)
	ADDQ $16, R10
	JMP  cschunk

csdone:
	VZEROUPPER
	RET

// func sumSqAVX2(x *float32, n int, out *[16]float32)
//
// See sumSqAVX512: out[l] holds the sum over i ≡ l mod 16 of x[i]² (two
// ymm accumulators side by side).
TEXT ·sumSqAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

ssloop32:
	CMPQ R11, $32
	JLT  sstail
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS Y4, Y4, Y0
	VFMADD231PS Y5, Y5, Y1
	VFMADD231PS Y6, Y6, Y2
	VFMADD231PS Y7, Y7, Y3
	ADDQ $128, SI
	SUBQ $32, R11
	JMP  ssloop32

sstail:
	TESTQ R11, R11
	JLE  ssdone
	MOVQ $16, R10
	MOVQ R11, R12
	CMPQ R12, R10
	CMOVQGT R10, R12
	SUBQ R12, R10
	LEAQ f32mask<>(SB), R13
	VMOVUPS (R13)(R10*4), Y14
	VMOVUPS 32(R13)(R10*4), Y15
	VMASKMOVPS (SI), Y14, Y4
	VMASKMOVPS 32(SI), Y15, Y5
	VFMADD231PS Y4, Y4, Y0
	VFMADD231PS Y5, Y5, Y1
	ADDQ $64, SI
	SUBQ $16, R11
	JMP  sstail

ssdone:
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	MOVQ out+16(FP), DI
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VZEROUPPER
	RET

// func adamAVX2(p, grad, m, v *float32, n int, c *[8]float32)
//
// See adamAVX512: 8 parameters per iteration, the tail masked.
TEXT ·adamAVX2(SB), NOSPLIT, $8-48
	// Flush subnormals to zero (MXCSR FTZ, bit 15) and read them as zero
	// (DAZ, bit 6) for this loop only; the caller's MXCSR is restored
	// below. A parameter whose gradient stays 0 has its moments decay
	// geometrically through the subnormal range, where every operation
	// takes a microcode assist (about 30× slower over the whole update);
	// the portable twin flushes the stored moments the same way.
	STMXCSR 0(SP)
	MOVL 0(SP), BX             // BX = the caller's MXCSR
	MOVL BX, AX
	ORL  $0x8040, AX
	MOVL AX, 0(SP)
	LDMXCSR 0(SP)
	MOVQ p+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), R8
	MOVQ v+24(FP), R9
	MOVQ n+32(FP), R11
	MOVQ c+40(FP), AX
	VBROADCASTSS 0(AX), Y8     // scale
	VBROADCASTSS 4(AX), Y9     // β₁
	VBROADCASTSS 8(AX), Y10    // 1−β₁
	VBROADCASTSS 12(AX), Y11   // β₂
	VBROADCASTSS 16(AX), Y12   // 1−β₂
	VBROADCASTSS 20(AX), Y13   // step
	VBROADCASTSS 24(AX), Y14   // 1/sqrt(1−β₂ᵗ)
	VBROADCASTSS 28(AX), Y15   // ε
	LEAQ f32mask<>(SB), R13

adloop:
	TESTQ R11, R11
	JLE  addone
	MOVQ $8, R12
	MOVQ R11, R10
	CMPQ R10, R12
	CMOVQGT R12, R10
	MOVQ $16, R12
	SUBQ R10, R12
	VMOVUPS (R13)(R12*4), Y7           // mask of min(n, 8) lanes
	VMASKMOVPS (SI), Y7, Y0            // g
	VMULPS Y8, Y0, Y0
	VMASKMOVPS (R8), Y7, Y1            // m
	VMULPS Y9, Y1, Y1
	VFMADD231PS Y10, Y0, Y1
	VMASKMOVPS (R9), Y7, Y2            // v
	VMULPS Y0, Y0, Y3
	VMULPS Y11, Y2, Y2
	VFMADD231PS Y12, Y3, Y2
	VSQRTPS Y2, Y4
	VMOVAPS Y15, Y5
	VFMADD231PS Y14, Y4, Y5
	VMULPS Y13, Y1, Y6
	VDIVPS Y5, Y6, Y6
	VMASKMOVPS (DI), Y7, Y3
	VSUBPS Y6, Y3, Y3
	VMASKMOVPS Y1, Y7, (R8)
	VMASKMOVPS Y2, Y7, (R9)
	VMASKMOVPS Y3, Y7, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, R9
	SUBQ $8, R11
	JMP  adloop

addone:
	MOVL BX, 0(SP)
	LDMXCSR 0(SP)
	VZEROUPPER
	RET

// func transpose8AVX2(src *float32, lds int, dst *float32, ldd int)
//
// Transposes one 8×8 block: dst[c·ldd + r] = src[r·lds + c] for r, c < 8
// (strides in elements). Unpack, shuffle, then swap 128-bit lanes: the
// textbook 24-instruction 8×8 transpose.
TEXT ·transpose8AVX2(SB), NOSPLIT, $0-32
	MOVQ src+0(FP), SI
	MOVQ lds+8(FP), BX
	SHLQ $2, BX
	MOVQ dst+16(FP), DI
	MOVQ ldd+24(FP), DX
	SHLQ $2, DX
	LEAQ (BX)(BX*2), CX        // 3 rows of src
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(BX*1), Y1
	VMOVUPS (SI)(BX*2), Y2
	VMOVUPS (SI)(CX*1), Y3
	LEAQ (SI)(BX*4), SI
	VMOVUPS (SI), Y4
	VMOVUPS (SI)(BX*1), Y5
	VMOVUPS (SI)(BX*2), Y6
	VMOVUPS (SI)(CX*1), Y7
	VUNPCKLPS Y1, Y0, Y8       // t0 = unpacklo(r0, r1)
	VUNPCKHPS Y1, Y0, Y9       // t1 = unpackhi(r0, r1)
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	VSHUFPS $0x44, Y10, Y8, Y0 // tt0 = shuffle(t0, t2, 1,0,1,0)
	VSHUFPS $0xEE, Y10, Y8, Y1 // tt1 = shuffle(t0, t2, 3,2,3,2)
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7
	VPERM2F128 $0x20, Y4, Y0, Y8 // column 0 = low lanes of tt0, tt4
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12 // column 4 = high lanes of tt0, tt4
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15
	LEAQ (DX)(DX*2), CX
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, (DI)(DX*1)
	VMOVUPS Y10, (DI)(DX*2)
	VMOVUPS Y11, (DI)(CX*1)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Y12, (DI)
	VMOVUPS Y13, (DI)(DX*1)
	VMOVUPS Y14, (DI)(DX*2)
	VMOVUPS Y15, (DI)(CX*1)
	VZEROUPPER
	RET

// func axpbyAVX2(dst, src *float32, n int, a, b float32)
//
// See axpbyAVX512: 8 per iteration, the tail masked.
TEXT ·axpbyAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), R11
	VBROADCASTSS a+24(FP), Y8
	VBROADCASTSS b+28(FP), Y9
	LEAQ f32mask<>(SB), R13

axloop:
	TESTQ R11, R11
	JLE  axdone
	MOVQ $8, R12
	MOVQ R11, R10
	CMPQ R10, R12
	CMOVQGT R12, R10
	MOVQ $16, R12
	SUBQ R10, R12
	VMOVUPS (R13)(R12*4), Y7
	VMASKMOVPS (DI), Y7, Y0
	VMASKMOVPS (SI), Y7, Y1
	VMULPS Y9, Y0, Y0
	VFMADD231PS Y8, Y1, Y0
	VMASKMOVPS Y0, Y7, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	SUBQ $8, R11
	JMP  axloop

axdone:
	VZEROUPPER
	RET
