package ter

import (
	"fmt"
	"image/color"
	"io"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/apexrl/apex/experiment/control"
)

// WriteNChainTable writes res as a text table: per method the fractions
// of datasets solved within Within and within Updates updates, the median
// and p10-p90 of the updates to the optimal return (">U" when not within
// U), and the mean |Q - Q*| after the last update; then the stages, the
// exact-sweep check and the acceptance checks.
func WriteNChainTable(w io.Writer, res *NChainResult) error {
	var b strings.Builder
	c := &res.Config
	minS, maxS, sumS, redraws := 1<<30, 0, 0, 0
	for _, d := range res.Datasets {
		minS, maxS, sumS = min(minS, d.Successes), max(maxS, d.Successes), sumS+d.Successes
		redraws += d.Attempts - 1
	}
	fmt.Fprintf(&b, "NChain N = %d (time limit %d): %d datasets of %d uniformly random steps (successful episodes per dataset %d-%d, mean %.1f; %d redrawn for lack of one).\n",
		c.N, 2*c.N*c.N, len(res.Datasets), c.Steps, minS, maxS, float64(sumS)/float64(max(len(res.Datasets), 1)), redraws)
	fmt.Fprintf(&b, "Tabular Q: lr %g, gamma %g, Q0 ~ U[0, %g), %d updates of one transition; greedy episode after each; optimal return %.5f.\n",
		c.LR, c.Gamma, c.InitMax, c.Updates, res.Optimal)
	rows := [][]string{{"method", fmt.Sprintf("solved <= %d", c.Within), fmt.Sprintf("solved <= %d", c.Updates), "median", "p10..p90", "mean |Q - Q*|"}}
	for _, m := range res.Methods {
		spread := res.fmtFirst(m.P10)
		if m.P90 != m.P10 {
			spread += ".." + res.fmtFirst(m.P90)
		}
		rows = append(rows, []string{m.Method, fmt.Sprintf("%.0f%%", 100*m.SolvedWithin), fmt.Sprintf("%.0f%%", 100*m.Solved),
			res.fmtFirst(m.Median), spread, fmt.Sprintf("%.4f", m.MeanQErr)})
	}
	control.WriteColumns(&b, rows, "  ", " ")
	b.WriteString("stages:\n")
	for _, m := range res.Methods {
		fmt.Fprintf(&b, "  %-10s %s\n", m.Method, m.Stage)
		if m.OtherRows > 0 {
			fmt.Fprintf(&b, "  %-10s %d rows not from the sweep\n", "", m.OtherRows)
		}
	}
	e := &res.Exact
	fmt.Fprintf(&b, "exact sweep (lr 1, Q 0): Q == Q* on every pair of %d of %d datasets; %d-%d updates per sweep, %d-%d pairs present, each pair once in %d\n",
		e.Exact, e.Datasets, e.MinUpdates, e.MaxUpdates, e.MinPairs, e.MaxPairs, e.UpdatesEqualPairs)
	control.WriteChecks(&b, res.AcceptanceChecks())
	_, err := io.WriteString(w, b.String())
	return err
}

// colours are the methods' colours, TER first.
var colours = []color.NRGBA{
	{213, 94, 0, 255}, {0, 0, 0, 255}, {0, 114, 178, 255}, {86, 180, 233, 255}, {0, 158, 115, 255}, {204, 121, 167, 255},
}

// SaveNChainPlot draws the fraction of datasets on which each method's
// greedy return has reached the optimum against the number of updates
// (the paper's Figure 2b as a success curve), with the Within horizon
// marked. The format follows path's extension (.png, .svg, .pdf).
func SaveNChainPlot(res *NChainResult, path string) error {
	c := &res.Config
	p := plot.New()
	p.Title.Text = fmt.Sprintf("NChain (N = %d): greedy return optimal, %d datasets of %d random steps", c.N, len(res.Datasets), c.Steps)
	p.X.Label.Text = "updates (one transition each)"
	p.Y.Label.Text = "fraction of datasets solved"
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, float64(c.Updates), 0, 1.02
	// Right, below the top: the curves that reach 1 do so on the left, the
	// slow ones stay low.
	p.Legend.Top, p.Legend.Left = true, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(8), -vg.Points(24)
	mark, err := plotter.NewLine(plotter.XYs{{X: float64(c.Within), Y: 0}, {X: float64(c.Within), Y: 1.02}})
	if err != nil {
		return err
	}
	mark.Color = color.Gray{Y: 150}
	mark.Dashes = []vg.Length{vg.Points(2), vg.Points(3)}
	p.Add(mark)
	for i, m := range res.Methods {
		xy := make(plotter.XYs, len(m.SolvedCurve))
		for u, f := range m.SolvedCurve {
			xy[u] = plotter.XY{X: float64(u), Y: f}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color, l.Width = colours[i%len(colours)], vg.Points(1.75)
		if i%2 == 1 {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(2)}
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (%.0f%% by %d, %.0f%% by %d)", m.Method, 100*m.SolvedWithin, c.Within, 100*m.Solved, c.Updates), l)
	}
	p.Legend.Add(fmt.Sprintf("%d updates", c.Within), mark)
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
