package meter

import "testing"

func TestSI(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1500: "1.5 K", 2.5e6: "2.50 M", 3e9: "3.00 G"} {
		if got := SI(v); got != want {
			t.Errorf("SI(%v) = %q, want %q", v, got, want)
		}
	}
}
