//go:build openblas

package model

// Optional OpenBLAS backend (Debian libopenblas-dev, through gonum/netlib).
// Build or test with -tags openblas; the default build stays pure Go and
// cgo-free. See doc.go, "# BLAS backend".

/*
#cgo LDFLAGS: -lopenblas
void openblas_set_num_threads(int);
*/
import "C"

import (
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/netlib/blas/netlib"
)

// init routes every blas64 call of the program to OpenBLAS, single
// threaded (its worker threads would compete with the Go scheduler and the
// model promises to run on the caller's goroutine only), and lets gemm pass
// whole matrices to it instead of gonum-sized tiles.
func init() {
	C.openblas_set_num_threads(1)
	blas64.Use(netlib.Implementation{})
	serialTiles = false
}
