package xmath

import "golang.org/x/sys/cpu"

// useAVX2 selects the vector kernel; tests flip it to check the portable
// path.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// powAffineAVX2 is in pow_amd64.s.
//
//go:noescape
func powAffineAVX2(dst, x *float64, n int, a, b, y float64)
