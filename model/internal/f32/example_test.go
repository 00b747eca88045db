package f32_test

import (
	"fmt"

	"github.com/apexrl/apex/model/internal/f32"
)

// A dense layer's forward with the bias and ReLU fused: y = max(x·W + b, 0)
// for a batch of 2 rows, 3 inputs and 2 outputs, all row-major.
func ExampleImpl_Gemm() {
	x := []float32{1, 2, 3, -1, 0, 1} // 2×3
	w := []float32{1, -1, 0, 1, 1, 0} // 3×2
	b := []float32{0.5, -4}           // 2
	y := make([]float32, 4)           // 2×2
	impl := f32.Best()                // AVX512, AVX2 or Portable
	impl.Gemm(2, 2, 3, x, 3, 1, w, 2, y, 2, f32.InitBias, b, f32.PostReLU, nil)
	fmt.Println(y)
	// Output: [4.5 0 0.5 0]
}
