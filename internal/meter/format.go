package meter

import "fmt"

// SI formats a rate or count v with a K, M or G suffix (1.2 K, 3.45 M),
// for the load tests' tables.
func SI(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2f G", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2f M", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f K", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
