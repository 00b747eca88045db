package lappal

import (
	"fmt"
	"io"
	"strings"
)

// WriteRegressionTable writes res as a text table: per noise setting, each
// method's stage and loss, learned w, predicted w_ref, relative error and
// whether it is within tolerance, then the predicted fixed points'
// intercepts side by side (in the skewed setting the outliers pull PER+MSE
// furthest, L1 least) and what each reference is.
func WriteRegressionTable(w io.Writer, res *RegressionResult) error {
	var b strings.Builder
	c := &res.Config
	fmt.Fprintf(&b, "Linear regression y = %s + noise, N = %d points held in an apex buffer, sampled through each method's stage.\n", formula(c.W), c.N)
	fmt.Fprintf(&b, "SGD: %d steps of %d rows, step size %g·(1+t/%g)^-%g, iterates averaged from step %d. Tolerance %.3g%%.\n",
		c.Steps, c.Batch, c.LR0, c.LRTau, c.LRDecay, int(c.AverageFrom*float64(c.Steps)), 100*c.Tolerance)
	header := []string{"method", "stage + loss", "learned w", "predicted w_ref", "rel err", "ok"}
	for _, s := range res.Settings {
		desc := "N(0, 1)"
		if s.Noise == Skewed {
			desc = fmt.Sprintf("%g·N(0, 1) + %g·N(%+g, 1)", 1-c.OutlierFrac, c.OutlierFrac, c.OutlierShift)
		}
		fmt.Fprintf(&b, "\nnoise %s: %s (sample mean %.4f, median %.4f)\n", s.Noise, desc, s.NoiseMean, s.NoiseMedian)
		rows := [][]string{header}
		for _, m := range s.Methods {
			ok := "yes"
			if !m.Within {
				ok = "NO"
			}
			rows = append(rows, []string{m.Method, m.Stage, vec(m.W), vec(m.WRef), fmt.Sprintf("%.3f%%", 100*m.RelErr), ok})
		}
		writeAligned(&b, rows)
		fmt.Fprintf(&b, "  predicted intercepts w0 (true %g):", c.W[0])
		for _, m := range s.Methods {
			switch m.Method {
			case "pal": // the same reference as lap
			case "lap":
				fmt.Fprintf(&b, "  lap=pal %.4f", m.WRef[0])
			default:
				fmt.Fprintf(&b, "  %s %.4f", m.Method, m.WRef[0])
			}
		}
		b.WriteString("\n")
	}
	if len(res.Settings) > 0 {
		b.WriteString("\nreferences:\n")
		for _, m := range res.Settings[0].Methods {
			fmt.Fprintf(&b, "  %-12s %s\n", m.Method, m.Reference)
			for _, w := range m.Warnings {
				fmt.Fprintf(&b, "  %-12s warning: %s\n", "", w)
			}
		}
	}
	verdict := "every method landed within tolerance of its predicted fixed point"
	if !res.AllWithin() {
		verdict = "NOT every method landed within tolerance of its predicted fixed point"
	}
	fmt.Fprintf(&b, "\n%s\n", verdict)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeAligned writes rows as left-aligned columns (the relative error
// right-aligned), indented by two spaces.
func writeAligned(b *strings.Builder, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, cell := range r {
			width[i] = max(width[i], len([]rune(cell)))
		}
	}
	for _, r := range rows {
		var line strings.Builder
		line.WriteString(" ")
		for i, cell := range r {
			pad := strings.Repeat(" ", width[i]-len([]rune(cell)))
			if i == 4 { // rel err: right-aligned
				line.WriteString(" " + pad + cell)
			} else {
				line.WriteString(" " + cell + pad)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
}

func vec(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.4f", x)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func formula(w []float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%g", w[0])
	for i, x := range w[1:] {
		fmt.Fprintf(&b, " %+g·x%d", x, i+1)
	}
	return b.String()
}
