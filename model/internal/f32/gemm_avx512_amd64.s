//go:build !purego

#include "textflag.h"

// AVX-512 (F) kernels. Each is the vector twin of the Go function of the
// same role in kernels_generic.go; kernels.go checks every bound before
// calling them, so they trust their arguments. Strides arrive in float32
// elements and are turned into bytes here. Column tails are handled with
// opmask registers: a masked load does not touch (and cannot fault on) the
// masked-off elements, and a masked store writes only the columns < n.

// ones is 1.0f (0x3f800000), broadcast for tanh's derivative 1 − y².
DATA f32one<>+0(SB)/4, $0x3f800000
GLOBL f32one<>(SB), RODATA|NOPTR, $4

// func gemm4AVX512(k int, a *float32, ars, aps int, b *float32, ldb int, c *float32, ldc int, n int, bias, aux *float32, mode int)
//
// Computes four rows of C (row i at c + i·ldc, i < 4) over all n columns:
//
//	C[i][j] = init[i][j] + Σ_{p<k} A(i, p) · B[p][j],   A(i, p) = a[i·ars + p·aps]
//
// then applies the epilogue. mode&3 selects init: 0 zero, 1 bias[j], 2 the
// current C. mode>>2 selects the epilogue: 0 none, 1 ReLU max(c, 0),
// 2 c·[aux > 0] (ReLU's derivative from the layer's output), 3 c·(1 − aux²)
// (tanh's derivative); aux has C's layout (ld = ldc).
//
// ReLU is VMAXPS with c as the second source, so a NaN stays NaN (as in
// the portable twin and model.ReLU) and reaches the finiteness checks.
//
// Columns advance in chunks of 64 while 64 remain (the wide path below,
// a 4×64 tile in 16 zmm accumulators), then of 32 with a 4×32 tile: 8 zmm
// accumulators (Z0–Z7, row r in Z(2r), Z(2r+1)), per k step 2 loads of B,
// 4 broadcasts of A and 8 FMAs, with K1/K2 masking the chunk's two halves.
TEXT ·gemm4AVX512(SB), NOSPLIT, $0-96
	MOVQ ars+16(FP), BX
	SHLQ $2, BX                // BX = row stride of A in bytes
	LEAQ (BX)(BX*2), CX        // CX = 3 rows
	MOVQ aps+24(FP), DX
	SHLQ $2, DX                // DX = k stride of A in bytes
	MOVQ ldb+40(FP), DI
	SHLQ $2, DI                // DI = row stride of B in bytes
	MOVQ ldc+56(FP), R9
	SHLQ $2, R9                // R9 = row stride of C (and aux) in bytes
	XORQ R10, R10              // R10 = j, first column of the chunk
	VPXORD Z31, Z31, Z31       // Z31 = 0
	VBROADCASTSS f32one<>(SB), Z30

chunk:
	MOVQ n+64(FP), R14
	SUBQ R10, R14              // columns left
	JLE  done
	CMPQ R14, $64
	JGE  wide
	MOVQ $32, R11
	CMPQ R14, R11
	CMOVQGT R11, R14           // R14 = min(left, 32)
	MOVL $-1, R11
	BZHIL R14, R11, R11        // low R14 bits set
	KMOVW R11, K1
	SHRL $16, R11
	KMOVW R11, K2

	MOVQ c+48(FP), R8
	LEAQ (R8)(R10*4), R8       // R8 = &C[0][j]
	LEAQ (R8)(R9*2), R12       // R12 = &C[2][j]

	MOVQ mode+88(FP), R11
	ANDQ $3, R11
	CMPQ R11, $1
	JEQ  initbias
	CMPQ R11, $2
	JEQ  initacc
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	JMP  kloop0

initbias:
	MOVQ bias+72(FP), R11
	VMOVUPS.Z (R11)(R10*4), K1, Z0
	VMOVUPS.Z 64(R11)(R10*4), K2, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z1, Z3
	VMOVAPS Z0, Z4
	VMOVAPS Z1, Z5
	VMOVAPS Z0, Z6
	VMOVAPS Z1, Z7
	JMP  kloop0

initacc:
	VMOVUPS.Z (R8), K1, Z0
	VMOVUPS.Z 64(R8), K2, Z1
	VMOVUPS.Z (R8)(R9*1), K1, Z2
	VMOVUPS.Z 64(R8)(R9*1), K2, Z3
	VMOVUPS.Z (R12), K1, Z4
	VMOVUPS.Z 64(R12), K2, Z5
	VMOVUPS.Z (R12)(R9*1), K1, Z6
	VMOVUPS.Z 64(R12)(R9*1), K2, Z7

kloop0:
	MOVQ a+8(FP), AX           // AX = &A(0, p)
	MOVQ b+32(FP), SI
	LEAQ (SI)(R10*4), SI       // SI = &B[p][j]
	MOVQ k+0(FP), R11
	TESTQ R11, R11
	JLE  post
	CMPQ R14, $16
	JLE  khalf                 // ≤ 16 columns: one vector per row

kloop:
	VMOVUPS.Z (SI), K1, Z8
	VMOVUPS.Z 64(SI), K2, Z9
	VBROADCASTSS (AX), Z10
	VBROADCASTSS (AX)(BX*1), Z11
	VBROADCASTSS (AX)(BX*2), Z12
	VBROADCASTSS (AX)(CX*1), Z13
	VFMADD231PS Z8, Z10, Z0
	VFMADD231PS Z9, Z10, Z1
	VFMADD231PS Z8, Z11, Z2
	VFMADD231PS Z9, Z11, Z3
	VFMADD231PS Z8, Z12, Z4
	VFMADD231PS Z9, Z12, Z5
	VFMADD231PS Z8, Z13, Z6
	VFMADD231PS Z9, Z13, Z7
	ADDQ DX, AX
	ADDQ DI, SI
	DECQ R11
	JNZ  kloop
	JMP  post

// khalf: the chunk's second half is empty (K2 = 0), so only Z0, Z2, Z4
// and Z6 take products (a narrow layer, a Q head of a few actions); the
// others stay as init left them and their masked stores write nothing.
khalf:
	VMOVUPS.Z (SI), K1, Z8
	VBROADCASTSS (AX), Z10
	VBROADCASTSS (AX)(BX*1), Z11
	VBROADCASTSS (AX)(BX*2), Z12
	VBROADCASTSS (AX)(CX*1), Z13
	VFMADD231PS Z8, Z10, Z0
	VFMADD231PS Z8, Z11, Z2
	VFMADD231PS Z8, Z12, Z4
	VFMADD231PS Z8, Z13, Z6
	ADDQ DX, AX
	ADDQ DI, SI
	DECQ R11
	JNZ  khalf

post:
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
	VMAXPS Z0, Z31, Z0
	VMAXPS Z1, Z31, Z1
	VMAXPS Z2, Z31, Z2
	VMAXPS Z3, Z31, Z3
	VMAXPS Z4, Z31, Z4
	VMAXPS Z5, Z31, Z5
	VMAXPS Z6, Z31, Z6
	VMAXPS Z7, Z31, Z7
	JMP  store

postrelugrad:
	MOVQ aux+80(FP), R13
	LEAQ (R13)(R10*4), R13     // R13 = &aux[0][j]
	LEAQ (R13)(R9*2), R11      // R11 = &aux[2][j]
	VMOVUPS.Z (R13), K1, Z8
	VMOVUPS.Z 64(R13), K2, Z9
	VMOVUPS.Z (R13)(R9*1), K1, Z10
	VMOVUPS.Z 64(R13)(R9*1), K2, Z11
	VMOVUPS.Z (R11), K1, Z12
	VMOVUPS.Z 64(R11), K2, Z13
	VMOVUPS.Z (R11)(R9*1), K1, Z14
	VMOVUPS.Z 64(R11)(R9*1), K2, Z15
	VCMPPS $14, Z31, Z8, K3    // K3 = aux > 0
	VMOVAPS.Z Z0, K3, Z0
	VCMPPS $14, Z31, Z9, K3
	VMOVAPS.Z Z1, K3, Z1
	VCMPPS $14, Z31, Z10, K3
	VMOVAPS.Z Z2, K3, Z2
	VCMPPS $14, Z31, Z11, K3
	VMOVAPS.Z Z3, K3, Z3
	VCMPPS $14, Z31, Z12, K3
	VMOVAPS.Z Z4, K3, Z4
	VCMPPS $14, Z31, Z13, K3
	VMOVAPS.Z Z5, K3, Z5
	VCMPPS $14, Z31, Z14, K3
	VMOVAPS.Z Z6, K3, Z6
	VCMPPS $14, Z31, Z15, K3
	VMOVAPS.Z Z7, K3, Z7
	JMP  store

posttanhgrad:
	MOVQ aux+80(FP), R13
	LEAQ (R13)(R10*4), R13
	LEAQ (R13)(R9*2), R11
	VMOVUPS.Z (R13), K1, Z8
	VMOVUPS.Z 64(R13), K2, Z9
	VMOVUPS.Z (R13)(R9*1), K1, Z10
	VMOVUPS.Z 64(R13)(R9*1), K2, Z11
	VMOVUPS.Z (R11), K1, Z12
	VMOVUPS.Z 64(R11), K2, Z13
	VMOVUPS.Z (R11)(R9*1), K1, Z14
	VMOVUPS.Z 64(R11)(R9*1), K2, Z15
	VMOVAPS Z30, Z16
	VFNMADD231PS Z8, Z8, Z16   // Z16 = 1 − aux²
	VMULPS Z16, Z0, Z0
	VMOVAPS Z30, Z16
	VFNMADD231PS Z9, Z9, Z16
	VMULPS Z16, Z1, Z1
	VMOVAPS Z30, Z16
	VFNMADD231PS Z10, Z10, Z16
	VMULPS Z16, Z2, Z2
	VMOVAPS Z30, Z16
	VFNMADD231PS Z11, Z11, Z16
	VMULPS Z16, Z3, Z3
	VMOVAPS Z30, Z16
	VFNMADD231PS Z12, Z12, Z16
	VMULPS Z16, Z4, Z4
	VMOVAPS Z30, Z16
	VFNMADD231PS Z13, Z13, Z16
	VMULPS Z16, Z5, Z5
	VMOVAPS Z30, Z16
	VFNMADD231PS Z14, Z14, Z16
	VMULPS Z16, Z6, Z6
	VMOVAPS Z30, Z16
	VFNMADD231PS Z15, Z15, Z16
	VMULPS Z16, Z7, Z7

store:
	VMOVUPS Z0, K1, (R8)
	VMOVUPS Z1, K2, 64(R8)
	VMOVUPS Z2, K1, (R8)(R9*1)
	VMOVUPS Z3, K2, 64(R8)(R9*1)
	VMOVUPS Z4, K1, (R12)
	VMOVUPS Z5, K2, 64(R12)
	VMOVUPS Z6, K1, (R12)(R9*1)
	VMOVUPS Z7, K2, 64(R12)(R9*1)
	ADDQ $32, R10
	JMP  chunk


// wide: 64 full columns with a 4×64 tile, 16 accumulators (row r in
// Z(4r)…Z(4r+3)): per k step 4 loads of B and 4 broadcasts of A feed
// 16 FMAs, twice the 4×32 tile's ratio, and 16 independent sums hide
// the FMA latency. No masks: every column exists.
wide:
	MOVQ c+48(FP), R8
	LEAQ (R8)(R10*4), R8
	LEAQ (R8)(R9*2), R12
	MOVQ mode+88(FP), R11
	ANDQ $3, R11
	CMPQ R11, $1
	JEQ  winitbias
	CMPQ R11, $2
	JEQ  winitacc
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	JMP  wkloop0

winitbias:
	MOVQ bias+72(FP), R11
	LEAQ (R11)(R10*4), R11
	VMOVUPS 0(R11), Z0
	VMOVUPS 64(R11), Z1
	VMOVUPS 128(R11), Z2
	VMOVUPS 192(R11), Z3
	VMOVAPS Z0, Z4
	VMOVAPS Z1, Z5
	VMOVAPS Z2, Z6
	VMOVAPS Z3, Z7
	VMOVAPS Z0, Z8
	VMOVAPS Z1, Z9
	VMOVAPS Z2, Z10
	VMOVAPS Z3, Z11
	VMOVAPS Z0, Z12
	VMOVAPS Z1, Z13
	VMOVAPS Z2, Z14
	VMOVAPS Z3, Z15
	JMP  wkloop0

winitacc:
	VMOVUPS (R8), Z0
	VMOVUPS 64(R8), Z1
	VMOVUPS 128(R8), Z2
	VMOVUPS 192(R8), Z3
	VMOVUPS (R8)(R9*1), Z4
	VMOVUPS 64(R8)(R9*1), Z5
	VMOVUPS 128(R8)(R9*1), Z6
	VMOVUPS 192(R8)(R9*1), Z7
	VMOVUPS (R12), Z8
	VMOVUPS 64(R12), Z9
	VMOVUPS 128(R12), Z10
	VMOVUPS 192(R12), Z11
	VMOVUPS (R12)(R9*1), Z12
	VMOVUPS 64(R12)(R9*1), Z13
	VMOVUPS 128(R12)(R9*1), Z14
	VMOVUPS 192(R12)(R9*1), Z15

wkloop0:
	MOVQ a+8(FP), AX
	MOVQ b+32(FP), SI
	LEAQ (SI)(R10*4), SI
	MOVQ k+0(FP), R11
	TESTQ R11, R11
	JLE  wpost

wkloop:
	VMOVUPS (SI), Z16
	VMOVUPS 64(SI), Z17
	VMOVUPS 128(SI), Z18
	VMOVUPS 192(SI), Z19
	VBROADCASTSS (AX), Z20
	VFMADD231PS Z16, Z20, Z0
	VFMADD231PS Z17, Z20, Z1
	VFMADD231PS Z18, Z20, Z2
	VFMADD231PS Z19, Z20, Z3
	VBROADCASTSS (AX)(BX*1), Z21
	VFMADD231PS Z16, Z21, Z4
	VFMADD231PS Z17, Z21, Z5
	VFMADD231PS Z18, Z21, Z6
	VFMADD231PS Z19, Z21, Z7
	VBROADCASTSS (AX)(BX*2), Z22
	VFMADD231PS Z16, Z22, Z8
	VFMADD231PS Z17, Z22, Z9
	VFMADD231PS Z18, Z22, Z10
	VFMADD231PS Z19, Z22, Z11
	VBROADCASTSS (AX)(CX*1), Z23
	VFMADD231PS Z16, Z23, Z12
	VFMADD231PS Z17, Z23, Z13
	VFMADD231PS Z18, Z23, Z14
	VFMADD231PS Z19, Z23, Z15
	ADDQ DX, AX
	ADDQ DI, SI
	DECQ R11
	JNZ  wkloop

wpost:
	MOVQ mode+88(FP), R11
	SHRQ $2, R11
	CMPQ R11, $1
	JEQ  wpostrelu
	CMPQ R11, $2
	JEQ  wpostrelugrad
	CMPQ R11, $3
	JEQ  wposttanhgrad
	JMP  wstore

wpostrelu:
	VMAXPS Z0, Z31, Z0
	VMAXPS Z1, Z31, Z1
	VMAXPS Z2, Z31, Z2
	VMAXPS Z3, Z31, Z3
	VMAXPS Z4, Z31, Z4
	VMAXPS Z5, Z31, Z5
	VMAXPS Z6, Z31, Z6
	VMAXPS Z7, Z31, Z7
	VMAXPS Z8, Z31, Z8
	VMAXPS Z9, Z31, Z9
	VMAXPS Z10, Z31, Z10
	VMAXPS Z11, Z31, Z11
	VMAXPS Z12, Z31, Z12
	VMAXPS Z13, Z31, Z13
	VMAXPS Z14, Z31, Z14
	VMAXPS Z15, Z31, Z15
	JMP  wstore

wpostrelugrad:
	MOVQ aux+80(FP), R13
	LEAQ (R13)(R10*4), R13
	LEAQ (R13)(R9*2), R11
	VMOVUPS (R13), Z16
	VMOVUPS 64(R13), Z17
	VMOVUPS 128(R13), Z18
	VMOVUPS 192(R13), Z19
	VCMPPS $14, Z31, Z16, K3
	VMOVAPS.Z Z0, K3, Z0
	VCMPPS $14, Z31, Z17, K3
	VMOVAPS.Z Z1, K3, Z1
	VCMPPS $14, Z31, Z18, K3
	VMOVAPS.Z Z2, K3, Z2
	VCMPPS $14, Z31, Z19, K3
	VMOVAPS.Z Z3, K3, Z3
	VMOVUPS (R13)(R9*1), Z16
	VMOVUPS 64(R13)(R9*1), Z17
	VMOVUPS 128(R13)(R9*1), Z18
	VMOVUPS 192(R13)(R9*1), Z19
	VCMPPS $14, Z31, Z16, K3
	VMOVAPS.Z Z4, K3, Z4
	VCMPPS $14, Z31, Z17, K3
	VMOVAPS.Z Z5, K3, Z5
	VCMPPS $14, Z31, Z18, K3
	VMOVAPS.Z Z6, K3, Z6
	VCMPPS $14, Z31, Z19, K3
	VMOVAPS.Z Z7, K3, Z7
	VMOVUPS (R11), Z16
	VMOVUPS 64(R11), Z17
	VMOVUPS 128(R11), Z18
	VMOVUPS 192(R11), Z19
	VCMPPS $14, Z31, Z16, K3
	VMOVAPS.Z Z8, K3, Z8
	VCMPPS $14, Z31, Z17, K3
	VMOVAPS.Z Z9, K3, Z9
	VCMPPS $14, Z31, Z18, K3
	VMOVAPS.Z Z10, K3, Z10
	VCMPPS $14, Z31, Z19, K3
	VMOVAPS.Z Z11, K3, Z11
	VMOVUPS (R11)(R9*1), Z16
	VMOVUPS 64(R11)(R9*1), Z17
	VMOVUPS 128(R11)(R9*1), Z18
	VMOVUPS 192(R11)(R9*1), Z19
	VCMPPS $14, Z31, Z16, K3
	VMOVAPS.Z Z12, K3, Z12
	VCMPPS $14, Z31, Z17, K3
	VMOVAPS.Z Z13, K3, Z13
	VCMPPS $14, Z31, Z18, K3
	VMOVAPS.Z Z14, K3, Z14
	VCMPPS $14, Z31, Z19, K3
	VMOVAPS.Z Z15, K3, Z15
	JMP  wstore

wposttanhgrad:
	MOVQ aux+80(FP), R13
	LEAQ (R13)(R10*4), R13
	LEAQ (R13)(R9*2), R11
	VMOVUPS (R13), Z16
	VMOVUPS 64(R13), Z17
	VMOVUPS 128(R13), Z18
	VMOVUPS 192(R13), Z19
	VMOVAPS Z30, Z20
	VFNMADD231PS Z16, Z16, Z20
	VMULPS Z20, Z0, Z0
	VMOVAPS Z30, Z21
	VFNMADD231PS Z17, Z17, Z21
	VMULPS Z21, Z1, Z1
	VMOVAPS Z30, Z22
	VFNMADD231PS Z18, Z18, Z22
	VMULPS Z22, Z2, Z2
	VMOVAPS Z30, Z23
	VFNMADD231PS Z19, Z19, Z23
	VMULPS Z23, Z3, Z3
	VMOVUPS (R13)(R9*1), Z16
	VMOVUPS 64(R13)(R9*1), Z17
	VMOVUPS 128(R13)(R9*1), Z18
	VMOVUPS 192(R13)(R9*1), Z19
	VMOVAPS Z30, Z20
	VFNMADD231PS Z16, Z16, Z20
	VMULPS Z20, Z4, Z4
	VMOVAPS Z30, Z21
	VFNMADD231PS Z17, Z17, Z21
	VMULPS Z21, Z5, Z5
	VMOVAPS Z30, Z22
	VFNMADD231PS Z18, Z18, Z22
	VMULPS Z22, Z6, Z6
	VMOVAPS Z30, Z23
	VFNMADD231PS Z19, Z19, Z23
	VMULPS Z23, Z7, Z7
	VMOVUPS (R11), Z16
	VMOVUPS 64(R11), Z17
	VMOVUPS 128(R11), Z18
	VMOVUPS 192(R11), Z19
	VMOVAPS Z30, Z20
	VFNMADD231PS Z16, Z16, Z20
	VMULPS Z20, Z8, Z8
	VMOVAPS Z30, Z21
	VFNMADD231PS Z17, Z17, Z21
	VMULPS Z21, Z9, Z9
	VMOVAPS Z30, Z22
	VFNMADD231PS Z18, Z18, Z22
	VMULPS Z22, Z10, Z10
	VMOVAPS Z30, Z23
	VFNMADD231PS Z19, Z19, Z23
	VMULPS Z23, Z11, Z11
	VMOVUPS (R11)(R9*1), Z16
	VMOVUPS 64(R11)(R9*1), Z17
	VMOVUPS 128(R11)(R9*1), Z18
	VMOVUPS 192(R11)(R9*1), Z19
	VMOVAPS Z30, Z20
	VFNMADD231PS Z16, Z16, Z20
	VMULPS Z20, Z12, Z12
	VMOVAPS Z30, Z21
	VFNMADD231PS Z17, Z17, Z21
	VMULPS Z21, Z13, Z13
	VMOVAPS Z30, Z22
	VFNMADD231PS Z18, Z18, Z22
	VMULPS Z22, Z14, Z14
	VMOVAPS Z30, Z23
	VFNMADD231PS Z19, Z19, Z23
	VMULPS Z23, Z15, Z15

wstore:
	VMOVUPS Z0, (R8)
	VMOVUPS Z1, 64(R8)
	VMOVUPS Z2, 128(R8)
	VMOVUPS Z3, 192(R8)
	VMOVUPS Z4, (R8)(R9*1)
	VMOVUPS Z5, 64(R8)(R9*1)
	VMOVUPS Z6, 128(R8)(R9*1)
	VMOVUPS Z7, 192(R8)(R9*1)
	VMOVUPS Z8, (R12)
	VMOVUPS Z9, 64(R12)
	VMOVUPS Z10, 128(R12)
	VMOVUPS Z11, 192(R12)
	VMOVUPS Z12, (R12)(R9*1)
	VMOVUPS Z13, 64(R12)(R9*1)
	VMOVUPS Z14, 128(R12)(R9*1)
	VMOVUPS Z15, 192(R12)(R9*1)
	ADDQ $64, R10
	JMP  chunk

done:
	VZEROUPPER
	RET

// func colSumAVX512(dst, src *float32, rows, n, ld int)
//
// dst[j] = Σ_{r<rows} src[r·ld + j] for j < n (the bias gradient, a column
// sum of dZ). Chunks of 32 columns, two accumulators per column vector
// (even and odd rows) to hide the add latency.
TEXT ·colSumAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ ld+32(FP), R9
	SHLQ $2, R9
	XORQ R10, R10

cschunk:
	MOVQ n+24(FP), R14
	SUBQ R10, R14
	JLE  csdone
	MOVQ $32, R11
	CMPQ R14, R11
	CMOVQGT R11, R14
	MOVL $-1, R11
	BZHIL R14, R11, R11
	KMOVW R11, K1
	SHRL $16, R11
	KMOVW R11, K2
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ src+8(FP), SI
	LEAQ (SI)(R10*4), SI
	MOVQ rows+16(FP), R11

csloop2:
	CMPQ R11, $2
	JLT  csloop1
	VADDPS.Z (SI), Z0, K1, Z0
	VADDPS.Z 64(SI), Z1, K2, Z1
	VADDPS.Z (SI)(R9*1), Z2, K1, Z2
	VADDPS.Z 64(SI)(R9*1), Z3, K2, Z3
	LEAQ (SI)(R9*2), SI
	SUBQ $2, R11
	JMP  csloop2

csloop1:
	TESTQ R11, R11
	JLE  csstore
	VADDPS.Z (SI), Z0, K1, Z0
	VADDPS.Z 64(SI), Z1, K2, Z1

csstore:
	VADDPS Z2, Z0, Z0
	VADDPS Z3, Z1, Z1
	VMOVUPS Z0, K1, (DI)(R10*4)
	VMOVUPS Z1, K2, 64(DI)(R10*4)
	ADDQ $32, R10
	JMP  cschunk

csdone:
	VZEROUPPER
	RET

// func sumSqAVX512(x *float32, n int, out *[16]float32)
//
// out[l] = Σ_{i ≡ l mod 16} x[i]² in lane order (four accumulators of 16
// lanes folded at the end); the caller adds the 16 lanes in float64.
TEXT ·sumSqAVX512(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), R11
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

ssloop64:
	CMPQ R11, $64
	JLT  sstail
	VMOVUPS (SI), Z4
	VMOVUPS 64(SI), Z5
	VMOVUPS 128(SI), Z6
	VMOVUPS 192(SI), Z7
	VFMADD231PS Z4, Z4, Z0
	VFMADD231PS Z5, Z5, Z1
	VFMADD231PS Z6, Z6, Z2
	VFMADD231PS Z7, Z7, Z3
	ADDQ $256, SI
	SUBQ $64, R11
	JMP  ssloop64

sstail:
	TESTQ R11, R11
	JLE  ssdone
	MOVQ $16, R10
	CMPQ R11, R10
	MOVQ R11, R12
	CMOVQGT R10, R12
	MOVL $-1, R13
	BZHIL R12, R13, R13
	KMOVW R13, K1
	VMOVUPS.Z (SI), K1, Z4
	VFMADD231PS Z4, Z4, Z0
	ADDQ $64, SI
	SUBQ $16, R11
	JMP  sstail

ssdone:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	MOVQ out+16(FP), DI
	VMOVUPS Z0, (DI)
	VZEROUPPER
	RET

// func adamAVX512(p, grad, m, v *float32, n int, c *[8]float32)
//
// The fused Adam update of adamGeneric for n parameters, with the
// constants c = {scale, β₁, 1−β₁, β₂, 1−β₂, step, 1/sqrt(1−β₂ᵗ), ε}:
//
//	g' = scale·g; m = β₁m + (1−β₁)g'; v = β₂v + (1−β₂)g'²
//	p -= step · m / (sqrt(v)·bc2 + ε)
//
// 16 parameters per iteration, the tail masked.
TEXT ·adamAVX512(SB), NOSPLIT, $8-48
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
	VBROADCASTSS 0(AX), Z20    // scale
	VBROADCASTSS 4(AX), Z21    // β₁
	VBROADCASTSS 8(AX), Z22    // 1−β₁
	VBROADCASTSS 12(AX), Z23   // β₂
	VBROADCASTSS 16(AX), Z24   // 1−β₂
	VBROADCASTSS 20(AX), Z25   // step
	VBROADCASTSS 24(AX), Z26   // 1/sqrt(1−β₂ᵗ)
	VBROADCASTSS 28(AX), Z27   // ε
	XORQ R10, R10              // byte offset

adloop:
	TESTQ R11, R11
	JLE  addone
	MOVQ $16, R12
	CMPQ R11, R12
	MOVQ R11, R13
	CMOVQGT R12, R13
	MOVL $-1, R12
	BZHIL R13, R12, R12
	KMOVW R12, K1
	VMOVUPS.Z (SI)(R10*1), K1, Z0      // g
	VMULPS Z20, Z0, Z0                 // g' = scale·g
	VMOVUPS.Z (R8)(R10*1), K1, Z1      // m
	VMULPS Z21, Z1, Z1
	VFMADD231PS Z22, Z0, Z1            // m = β₁m + (1−β₁)g'
	VMOVUPS.Z (R9)(R10*1), K1, Z2      // v
	VMULPS Z0, Z0, Z3                  // g'²
	VMULPS Z23, Z2, Z2
	VFMADD231PS Z24, Z3, Z2            // v = β₂v + (1−β₂)g'²
	VSQRTPS Z2, Z4
	VMOVAPS Z27, Z5
	VFMADD231PS Z26, Z4, Z5            // sqrt(v)·bc2 + ε
	VMULPS Z25, Z1, Z6                 // step·m
	VDIVPS Z5, Z6, Z6                  // step·m / (…)
	VMOVUPS.Z (DI)(R10*1), K1, Z7
	VSUBPS Z6, Z7, Z7
	VMOVUPS Z1, K1, (R8)(R10*1)
	VMOVUPS Z2, K1, (R9)(R10*1)
	VMOVUPS Z7, K1, (DI)(R10*1)
	ADDQ $64, R10
	SUBQ $16, R11
	JMP  adloop

addone:
	MOVL BX, 0(SP)
	LDMXCSR 0(SP)
	VZEROUPPER
	RET

// func axpbyAVX512(dst, src *float32, n int, a, b float32)
//
// dst[i] = a·src[i] + b·dst[i] for i < n (Polyak's soft target update
// with a = τ, b = 1 − τ), 16 per iteration, the tail masked.
TEXT ·axpbyAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), R11
	VBROADCASTSS a+24(FP), Z8
	VBROADCASTSS b+28(FP), Z9
	XORQ R10, R10

axloop:
	TESTQ R11, R11
	JLE  axdone
	MOVQ $16, R12
	MOVQ R11, R13
	CMPQ R13, R12
	CMOVQGT R12, R13
	MOVL $-1, R12
	BZHIL R13, R12, R12
	KMOVW R12, K1
	VMOVUPS.Z (DI)(R10*1), K1, Z0
	VMOVUPS.Z (SI)(R10*1), K1, Z1
	VMULPS Z9, Z0, Z0
	VFMADD231PS Z8, Z1, Z0     // a·src + b·dst
	VMOVUPS Z0, K1, (DI)(R10*1)
	ADDQ $64, R10
	SUBQ $16, R11
	JMP  axloop

axdone:
	VZEROUPPER
	RET
