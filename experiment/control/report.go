package control

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WriteTable writes res as a text table: per method the final
// returns of every seed, their mean ± 95% CI and median, the mean of the
// last TailEvals periodic evaluations ± 95% CI, the mean wall
// time of a run, and the share of learner time in the replay (sample and
// write-back, the paper's Appendix B comparison); then the acceptance
// checks.
func WriteTable(w io.Writer, res *Result) error {
	var b strings.Builder
	c := &res.Config
	fmt.Fprintf(&b, "%s: %s on %s, %d learner steps per run, %d seeds, final evaluation of %d episodes\n",
		c.Name, c.Base.Algo, c.Base.Env, c.Base.Steps, len(c.Seeds), c.Base.FinalEpisodes)
	rows := [][]string{{"method", "final returns by seed", "mean ± 95% CI", "median", fmt.Sprintf("last %d evals ± CI", c.TailEvals), "s/run",
		"replay share (sample + write-back)"}}
	for _, a := range res.Arms {
		var fs []string
		for _, f := range a.Finals {
			fs = append(fs, fmt.Sprintf("%.1f", f))
		}
		rows = append(rows, []string{a.Sampler, strings.Join(fs, " "), fmt.Sprintf("%.1f ± %.1f", a.Mean, a.CI95),
			fmt.Sprintf("%.1f", a.Median), fmt.Sprintf("%.1f ± %.1f", a.TailMean, a.TailCI95), fmt.Sprintf("%.1f", a.Seconds),
			fmt.Sprintf("%.1f%% (%.1f%% + %.1f%%)", 100*a.ReplayShare, 100*a.SampleShare, 100*a.WriteBackShare)})
	}
	if c.Threshold != nil {
		rows[0] = append(rows[0], fmt.Sprintf("env steps to %g (median; reached)", *c.Threshold))
		for i, a := range res.Arms {
			med := "never"
			if !math.IsInf(a.MedianStepsTo, 1) {
				med = fmt.Sprintf("%.0f", a.MedianStepsTo)
			}
			rows[i+1] = append(rows[i+1], fmt.Sprintf("%s; %d/%d", med, a.Reached, len(a.StepsTo)))
		}
	}
	WriteColumns(&b, rows, "", " ")
	WriteChecks(&b, res.Checks)
	_, err := io.WriteString(w, b.String())
	return err
}

// colours are the arms' colours, uniform first in black.
var colours = []color.NRGBA{
	{0, 0, 0, 255}, {213, 94, 0, 255}, {0, 114, 178, 255}, {0, 158, 115, 255}, {204, 121, 167, 255}, {230, 159, 0, 255},
}

// SavePlot writes the arms' mean evaluation curves (mean return
// over seeds against learner steps) to path as a PNG.
func SavePlot(res *Result, path string) error {
	p := plot.New()
	c := &res.Config
	p.Title.Text = fmt.Sprintf("%s on %s: mean evaluation return over %d seeds", c.Base.Algo, c.Base.Env, len(c.Seeds))
	p.X.Label.Text = "learner steps"
	p.Y.Label.Text = "return"
	// Top left is empty: returns start low and rise.
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(8)
	for i, a := range res.Arms {
		xy := make(plotter.XYs, len(a.Curve))
		for j, pt := range a.Curve {
			xy[j] = plotter.XY{X: float64(pt.LearnerSteps), Y: pt.MeanReturn}
		}
		if len(xy) == 0 {
			continue
		}
		line, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		col := colours[i%len(colours)]
		line.Color, line.Width = col, vg.Points(1.5)
		pts.Color, pts.Shape = col, plotutil.Shape(i)
		p.Add(line, pts)
		p.Legend.Add(fmt.Sprintf("%s (final %.0f ± %.0f)", a.Sampler, a.Mean, a.CI95), line, pts)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// WriteColumns writes rows as left-aligned columns padded to their widest
// cell: each line starts with indent and its cells are separated by gap,
// with no padding after the last. The experiments' tables share it.
func WriteColumns(b *strings.Builder, rows [][]string, indent, gap string) {
	var w []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(w) {
				w = append(w, 0)
			}
			w[i] = max(w[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range rows {
		b.WriteString(indent)
		for i, c := range r {
			if i > 0 {
				b.WriteString(gap)
			}
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", w[i]-utf8.RuneCountInString(c)))
			}
		}
		b.WriteByte('\n')
	}
}
