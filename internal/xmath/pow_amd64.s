#include "textflag.h"

// Constants, each broadcast from one quadword.
DATA powMant<>+0(SB)/8, $0x000FFFFFFFFFFFFF
GLOBL powMant<>(SB), RODATA|NOPTR, $8
DATA powOne<>+0(SB)/8, $1.0
GLOBL powOne<>(SB), RODATA|NOPTR, $8
DATA powTwo<>+0(SB)/8, $2.0
GLOBL powTwo<>(SB), RODATA|NOPTR, $8
DATA powHalf<>+0(SB)/8, $0.5
GLOBL powHalf<>(SB), RODATA|NOPTR, $8
DATA powSqrt2<>+0(SB)/8, $1.41421356237309504880
GLOBL powSqrt2<>(SB), RODATA|NOPTR, $8
DATA powExpMagic<>+0(SB)/8, $0x4330000000000000
GLOBL powExpMagic<>(SB), RODATA|NOPTR, $8
DATA powExpBias<>+0(SB)/8, $4503599627371519.0
GLOBL powExpBias<>(SB), RODATA|NOPTR, $8
DATA powLn2Hi<>+0(SB)/8, $6.93147180369123816490e-01
GLOBL powLn2Hi<>(SB), RODATA|NOPTR, $8
DATA powLn2Lo<>+0(SB)/8, $1.90821492927058770002e-10
GLOBL powLn2Lo<>(SB), RODATA|NOPTR, $8
DATA powLog2e<>+0(SB)/8, $1.44269504088896338700e+00
GLOBL powLog2e<>(SB), RODATA|NOPTR, $8
DATA powL1<>+0(SB)/8, $6.666666666666735130e-01
GLOBL powL1<>(SB), RODATA|NOPTR, $8
DATA powL2<>+0(SB)/8, $3.999999999940941908e-01
GLOBL powL2<>(SB), RODATA|NOPTR, $8
DATA powL3<>+0(SB)/8, $2.857142874366239149e-01
GLOBL powL3<>(SB), RODATA|NOPTR, $8
DATA powL4<>+0(SB)/8, $2.222219843214978396e-01
GLOBL powL4<>(SB), RODATA|NOPTR, $8
DATA powL5<>+0(SB)/8, $1.818357216161805012e-01
GLOBL powL5<>(SB), RODATA|NOPTR, $8
DATA powL6<>+0(SB)/8, $1.531383769920937332e-01
GLOBL powL6<>(SB), RODATA|NOPTR, $8
DATA powL7<>+0(SB)/8, $1.479819860511658591e-01
GLOBL powL7<>(SB), RODATA|NOPTR, $8
DATA powP1<>+0(SB)/8, $1.66666666666666657415e-01
GLOBL powP1<>(SB), RODATA|NOPTR, $8
DATA powP2<>+0(SB)/8, $-2.77777777770155933842e-03
GLOBL powP2<>(SB), RODATA|NOPTR, $8
DATA powP3<>+0(SB)/8, $6.61375632143793436117e-05
GLOBL powP3<>(SB), RODATA|NOPTR, $8
DATA powP4<>+0(SB)/8, $-1.65339022054652515390e-06
GLOBL powP4<>(SB), RODATA|NOPTR, $8
DATA powP5<>+0(SB)/8, $4.13813679705723846039e-08
GLOBL powP5<>(SB), RODATA|NOPTR, $8
DATA powRound<>+0(SB)/8, $6755399441055744.0
GLOBL powRound<>(SB), RODATA|NOPTR, $8
DATA powMinNormal<>+0(SB)/8, $0x0010000000000000
GLOBL powMinNormal<>(SB), RODATA|NOPTR, $8
DATA powMaxFloat<>+0(SB)/8, $0x7FEFFFFFFFFFFFFF
GLOBL powMaxFloat<>(SB), RODATA|NOPTR, $8
DATA powMaxT<>+0(SB)/8, $707.0
GLOBL powMaxT<>(SB), RODATA|NOPTR, $8
DATA powMinT<>+0(SB)/8, $-707.0
GLOBL powMinT<>(SB), RODATA|NOPTR, $8
DATA powNaN<>+0(SB)/8, $0x7FF8000000000000
GLOBL powNaN<>(SB), RODATA|NOPTR, $8

// func powAffineAVX2(dst, x *float64, n int, a, b, y float64)
//
// dst[i] = (a·x[i] + b)^y for i < n (n a multiple of 4), as exp(y·ln v)
// with fdlibm's log and exp (the algorithms of package math), 4 lanes at
// a time. A lane whose v is not a finite normal positive number, or whose
// y·ln v lies outside [-707, 707], gets NaN: the caller recomputes those.
TEXT ·powAffineAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSD a+24(FP), Y14
	VBROADCASTSD b+32(FP), Y15
	VBROADCASTSD y+40(FP), Y13
	SHRQ $2, CX
	JEQ done

loop:
	// v = a·x + b
	VMOVUPD (SI), Y0
	VFMADD213PD Y15, Y14, Y0 // Y0 = Y14*Y0 + Y15

	// ok = v >= MinNormal && v <= MaxFloat (false for NaN)
	VBROADCASTSD powMinNormal<>(SB), Y1
	VCMPPD $0x1D, Y1, Y0, Y12 // v >= min (GE_OQ)
	VBROADCASTSD powMaxFloat<>(SB), Y1
	VCMPPD $0x12, Y1, Y0, Y1 // v <= max (LE_OQ)
	VANDPD Y1, Y12, Y12

	// e = biased exponent - 1023 as a double; m = mantissa in [1, 2)
	VPSRLQ $52, Y0, Y1
	VBROADCASTSD powExpMagic<>(SB), Y2
	VPOR Y2, Y1, Y1
	VBROADCASTSD powExpBias<>(SB), Y2
	VSUBPD Y2, Y1, Y1 // Y1 = e
	VBROADCASTSD powMant<>(SB), Y2
	VANDPD Y2, Y0, Y3
	VBROADCASTSD powOne<>(SB), Y4
	VORPD Y4, Y3, Y3 // Y3 = m

	// m >= √2: m /= 2, e++
	VBROADCASTSD powSqrt2<>(SB), Y2
	VCMPPD $0x1D, Y2, Y3, Y2 // mask m >= √2
	VBROADCASTSD powHalf<>(SB), Y5
	VMULPD Y5, Y3, Y5
	VBLENDVPD Y2, Y5, Y3, Y3
	VANDPD Y4, Y2, Y2 // 1.0 where the mask is set
	VADDPD Y2, Y1, Y1

	// f = m-1; s = f/(2+f); R = t1 + t2 (fdlibm's polynomial)
	VSUBPD Y4, Y3, Y3 // Y3 = f
	VBROADCASTSD powTwo<>(SB), Y2
	VADDPD Y3, Y2, Y2
	VDIVPD Y2, Y3, Y5 // Y5 = s
	VMULPD Y5, Y5, Y6 // s2
	VMULPD Y6, Y6, Y7 // s4
	// t1 = s2*(L1 + s4*(L3 + s4*(L5 + s4*L7)))
	VBROADCASTSD powL7<>(SB), Y8
	VBROADCASTSD powL5<>(SB), Y9
	VFMADD213PD Y9, Y7, Y8 // Y8 = s4*L7 + L5
	VBROADCASTSD powL3<>(SB), Y9
	VFMADD213PD Y9, Y7, Y8
	VBROADCASTSD powL1<>(SB), Y9
	VFMADD213PD Y9, Y7, Y8
	VMULPD Y6, Y8, Y8 // t1
	// t2 = s4*(L2 + s4*(L4 + s4*L6))
	VBROADCASTSD powL6<>(SB), Y9
	VBROADCASTSD powL4<>(SB), Y10
	VFMADD213PD Y10, Y7, Y9
	VBROADCASTSD powL2<>(SB), Y10
	VFMADD213PD Y10, Y7, Y9
	VMULPD Y7, Y9, Y9 // t2
	VADDPD Y9, Y8, Y8 // R
	// hfsq = 0.5*f*f
	VBROADCASTSD powHalf<>(SB), Y9
	VMULPD Y3, Y9, Y9
	VMULPD Y3, Y9, Y9 // hfsq
	// log = k*Ln2Hi - ((hfsq - (s*(hfsq+R) + k*Ln2Lo)) - f)
	VADDPD Y8, Y9, Y8 // hfsq+R
	VMULPD Y8, Y5, Y8 // s*(hfsq+R)
	VBROADCASTSD powLn2Lo<>(SB), Y10
	VMULPD Y10, Y1, Y10
	VADDPD Y10, Y8, Y8 // s*(hfsq+R) + k*Ln2Lo
	VSUBPD Y8, Y9, Y8 // hfsq - (...)
	VSUBPD Y3, Y8, Y8 // (...) - f
	VBROADCASTSD powLn2Hi<>(SB), Y10
	VMULPD Y10, Y1, Y10
	VSUBPD Y8, Y10, Y0 // Y0 = ln v

	// t = y·ln v; ok &= -707 <= t <= 707
	VMULPD Y13, Y0, Y0
	VBROADCASTSD powMaxT<>(SB), Y1
	VCMPPD $0x12, Y1, Y0, Y1
	VANDPD Y1, Y12, Y12
	VBROADCASTSD powMinT<>(SB), Y1
	VCMPPD $0x1D, Y1, Y0, Y1
	VANDPD Y1, Y12, Y12

	// k = round(t·log2e); hi = t - k·Ln2Hi; lo = k·Ln2Lo
	VBROADCASTSD powLog2e<>(SB), Y1
	VMULPD Y1, Y0, Y1
	VROUNDPD $0, Y1, Y1 // Y1 = k
	VBROADCASTSD powLn2Hi<>(SB), Y2
	VMULPD Y2, Y1, Y2
	VSUBPD Y2, Y0, Y2 // hi
	VBROADCASTSD powLn2Lo<>(SB), Y3
	VMULPD Y3, Y1, Y3 // lo
	// r = hi - lo; tt = r*r; c = r - tt*(P1+tt*(P2+tt*(P3+tt*(P4+tt*P5))))
	VSUBPD Y3, Y2, Y4 // r
	VMULPD Y4, Y4, Y5 // tt
	VBROADCASTSD powP5<>(SB), Y6
	VBROADCASTSD powP4<>(SB), Y7
	VFMADD213PD Y7, Y5, Y6
	VBROADCASTSD powP3<>(SB), Y7
	VFMADD213PD Y7, Y5, Y6
	VBROADCASTSD powP2<>(SB), Y7
	VFMADD213PD Y7, Y5, Y6
	VBROADCASTSD powP1<>(SB), Y7
	VFMADD213PD Y7, Y5, Y6
	VMULPD Y6, Y5, Y6
	VSUBPD Y6, Y4, Y6 // c
	// e = 1 - ((lo - (r*c)/(2-c)) - hi)
	VMULPD Y6, Y4, Y7 // r*c
	VBROADCASTSD powTwo<>(SB), Y8
	VSUBPD Y6, Y8, Y8 // 2-c
	VDIVPD Y8, Y7, Y7 // (r*c)/(2-c)
	VSUBPD Y7, Y3, Y7 // lo - (...)
	VSUBPD Y2, Y7, Y7 // (...) - hi
	VBROADCASTSD powOne<>(SB), Y8
	VSUBPD Y7, Y8, Y7 // e in [0.7, 1.42]
	// result = e·2^k: add k<<52 to e's bits
	VBROADCASTSD powRound<>(SB), Y8
	VADDPD Y8, Y1, Y1
	VPSLLQ $52, Y1, Y1
	VPADDQ Y1, Y7, Y7

	// bad lanes: NaN
	VBROADCASTSD powNaN<>(SB), Y8
	VBLENDVPD Y12, Y7, Y8, Y7
	VMOVUPD Y7, (DI)

	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE loop

done:
	VZEROUPPER
	RET
