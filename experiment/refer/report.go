package refer

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/apexrl/apex/experiment/control"
)

// WritePendulumTable writes part 1 as text: per method the final returns
// of every seed, their median and mean ± 95% CI, the mean of the last
// TailEvals evaluations, the far-policy fraction after the warm-up, the
// KL's peak and end (medians over seeds) and the wall time of a run; then
// the seed-mean return, far fraction and median KL at five points of the
// run; then the acceptance checks.
func WritePendulumTable(w io.Writer, r *PendulumResult) error {
	var b strings.Builder
	c := &r.Control.Config
	fmt.Fprintf(&b, "%s: %s on %s, %d learner steps per run (one per environment step after %d stored steps), %d seeds; "+
		"final = the final greedy evaluation of %d episodes (standing for the last 20 episodes)\n",
		c.Name, c.Base.Algo, c.Base.Env, c.Base.Steps, c.Base.MinSizeToSample, len(c.Seeds), c.Base.FinalEpisodes)
	rows := [][]string{{"method", "final returns by seed", "median", "mean ± 95% CI", fmt.Sprintf("last %d evals", c.TailEvals),
		fmt.Sprintf("far after %d (mean; max)", r.WarmUp), "KL peak", "KL end", "end/peak", "s/run"}}
	for i, a := range r.Arms {
		ca := r.Control.Arms[i]
		rows = append(rows, []string{a.Sampler, floats(a.Finals, "%.1f"), fmt.Sprintf("%.1f", a.MedianFinal),
			fmt.Sprintf("%.1f ± %.1f", ca.Mean, ca.CI95), fmt.Sprintf("%.1f ± %.1f", ca.TailMean, ca.TailCI95),
			fmt.Sprintf("%.3f; %.3f", a.FarMean, a.FarMax), fmt.Sprintf("%.3g", a.MedianKLPeak), fmt.Sprintf("%.3g", a.MedianKLEnd),
			fmt.Sprintf("%.2f", a.MedianKLRatio), fmt.Sprintf("%.0f", ca.Seconds)})
	}
	control.WriteColumns(&b, rows, "", "  ")
	b.WriteString("KL: the mean KL(mu||pi) of one learner batch at each evaluation; peak and end are each run's largest and last " +
		fmt.Sprintf("%d-evaluation moving average, medians over seeds\n", KLWindow))
	b.WriteString("\nover time (return: mean over seeds; far: mean; KL: median):\n")
	rows = [][]string{{"method"}}
	marks := timeMarks(c.Base.Steps)
	for _, s := range marks {
		rows[0] = append(rows[0], fmt.Sprintf("%dk return / far / KL", s/1000))
	}
	for i, a := range r.Arms {
		row := []string{a.Sampler}
		for _, s := range marks {
			j := indexOf(a.Steps, s)
			if j < 0 {
				row = append(row, "-")
				continue
			}
			row = append(row, fmt.Sprintf("%.0f / %.3f / %.3g", r.Control.Arms[i].Curve[j].MeanReturn, a.FarCurve[j], a.KLCurve[j]))
		}
		rows = append(rows, row)
	}
	control.WriteColumns(&b, rows, "", "  ")
	control.WriteChecks(&b, r.Checks)
	_, err := io.WriteString(w, b.String())
	return err
}

// timeMarks are five learner steps spread over a run of steps: its
// fifths, rounded down to thousands (the evaluation grid).
func timeMarks(steps int64) []int64 {
	var out []int64
	for i := int64(1); i <= 5; i++ {
		s := steps * i / 5 / 1000 * 1000
		if s > 0 && (len(out) == 0 || out[len(out)-1] != s) {
			out = append(out, s)
		}
	}
	return out
}

func indexOf(xs []int64, x int64) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// WriteLQRTable writes part 2 as text: the problem and its Riccati gain,
// per seed the fitted slope, its error against −K*, the intercept, the
// misfit, the final return, the policy's std and beta; the median; the
// check.
func WriteLQRTable(w io.Writer, r *LQRResult) error {
	var b strings.Builder
	c, p := &r.Config, &r.Config.Params
	fmt.Fprintf(&b, "LQR-v0 (A %g, B %g, Q %g, R %g, UMax %g, XMax %g, x_0 in [-%g, %g), noise %g), gamma %g: K* = %.6f, P = %.6f; "+
		"the optimal policy u = -%.4f x scores %.3f per episode on average\n",
		p.A, p.B, p.Q, p.R, p.UMax, p.XMax, p.X0, p.X0, p.NoiseStd, c.Gamma, r.K, r.P, r.K, r.OptimalReturn)
	fmt.Fprintf(&b, "V-RACER + full ReF-ER, %d learner steps per run (one per environment step after %d stored steps), %d seeds; "+
		"slope = least squares of the policy mean u(x) (environment units, before the clip) on %d states over [-%g, %g]\n",
		c.Steps, c.NStart, len(c.Seeds), c.GridPoints, p.X0, p.X0)
	rows := [][]string{{"seed", "slope", "(slope+K*)/K*", "intercept", "misfit RMS", "final return", "std", "beta", "s"}}
	for _, run := range r.Runs {
		rows = append(rows, []string{fmt.Sprint(run.Seed), fmt.Sprintf("%.4f", run.Slope), fmt.Sprintf("%+.1f%%", 100*(run.Slope+r.K)/r.K),
			fmt.Sprintf("%+.4f", run.Intercept), fmt.Sprintf("%.4f", run.Residual), fmt.Sprintf("%.3f", run.Final),
			fmt.Sprintf("%.3f", run.Std), fmt.Sprintf("%.3f", run.Beta), fmt.Sprintf("%.0f", run.Seconds)})
	}
	rows = append(rows, []string{"median", fmt.Sprintf("%.4f", r.MedianSlope), fmt.Sprintf("%+.1f%%", 100*(r.MedianSlope+r.K)/r.K)})
	control.WriteColumns(&b, rows, "", "  ")
	control.WriteChecks(&b, r.Checks)
	_, err := io.WriteString(w, b.String())
	return err
}

// colours are the arms' colours (control's palette, full ReF-ER first).
var colours = []color.NRGBA{
	{0, 0, 0, 255}, {213, 94, 0, 255}, {0, 114, 178, 255}, {0, 158, 115, 255}, {204, 121, 167, 255}, {230, 159, 0, 255},
}

// SaveFarPlot writes the arms' far-policy fraction of the stored steps
// (mean over seeds) against learner steps to path as a PNG, with D and
// the acceptance band FarTarget ± FarTolerance dashed and the warm-up
// dotted.
func SaveFarPlot(r *PendulumResult, path string) error {
	c := &r.Control.Config
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s on %s: far-policy fraction of the stored steps (mean over %d seeds)", c.Base.Algo, c.Base.Env, len(c.Seeds))
	p.X.Label.Text = "learner steps"
	p.Y.Label.Text = "far-policy fraction n_far/N"
	// Between full ReF-ER's band near 0.1 and the ablations (0.6 to 1).
	p.Legend.Top, p.Legend.YOffs = true, -2.2*vg.Inch
	for _, y := range []float64{FarTarget - FarTolerance, FarTarget, FarTarget + FarTolerance} {
		if err := addLine(p, plotter.XYs{{X: 0, Y: y}, {X: float64(c.Base.Steps), Y: y}}, color.NRGBA{128, 128, 128, 255}, true); err != nil {
			return err
		}
	}
	if err := addLine(p, plotter.XYs{{X: float64(r.WarmUp), Y: 0}, {X: float64(r.WarmUp), Y: FarTarget + 2*FarTolerance}},
		color.NRGBA{160, 160, 160, 255}, true); err != nil {
		return err
	}
	for i, a := range r.Arms {
		if err := addArm(p, i, a.Sampler, a.Steps, a.FarCurve, false); err != nil {
			return err
		}
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// SaveKLPlot writes the arms' mean KL(μ||π) of the sampled steps (one
// learner batch at each evaluation; median over seeds) against learner
// steps to path as a PNG, on a log axis; values <= 0 are left out (an arm
// without a ReF-ER stage, such as plain TD3, has none). With no positive
// value at all the plot is empty, on a linear axis.
func SaveKLPlot(r *PendulumResult, path string) error {
	c := &r.Control.Config
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s on %s: mean KL(mu||pi) of the sampled steps (median over %d seeds)", c.Base.Algo, c.Base.Env, len(c.Seeds))
	p.X.Label.Text = "learner steps"
	p.Y.Label.Text = "KL(mu||pi)"
	positive := false
	for _, a := range r.Arms {
		for _, y := range a.KLCurve {
			positive = positive || (y > 0 && !math.IsInf(y, 1))
		}
	}
	if positive {
		p.Y.Label.Text += ", log scale"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Legend.Top, p.Legend.YOffs = true, -1.3*vg.Inch
	for i, a := range r.Arms {
		if err := addArm(p, i, a.Sampler, a.Steps, a.KLCurve, true); err != nil {
			return err
		}
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// addArm adds arm i's curve ys over steps; positive keeps only finite
// values > 0 (for a log axis), else only finite values.
func addArm(p *plot.Plot, i int, name string, steps []int64, ys []float64, positive bool) error {
	var xy plotter.XYs
	for j, y := range ys {
		if math.IsNaN(y) || math.IsInf(y, 0) || (positive && y <= 0) {
			continue
		}
		xy = append(xy, plotter.XY{X: float64(steps[j]), Y: y})
	}
	if len(xy) == 0 {
		return nil
	}
	line, pts, err := plotter.NewLinePoints(xy)
	if err != nil {
		return err
	}
	col := colours[i%len(colours)]
	line.Color, line.Width = col, vg.Points(1.5)
	pts.Color, pts.Shape, pts.Radius = col, plotutil.Shape(i), vg.Points(2)
	p.Add(line, pts)
	p.Legend.Add(name, line, pts)
	return nil
}

// addLine adds a thin reference line through xy.
func addLine(p *plot.Plot, xy plotter.XYs, col color.Color, dashed bool) error {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.Color, l.Width = col, vg.Points(0.8)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	return nil
}

// SaveLQRPlot writes each run's learned policy mean u(x) on the grid and
// the optimal line −K*·x to path as a PNG.
func SaveLQRPlot(r *LQRResult, path string) error {
	c := &r.Config
	p := plot.New()
	p.Title.Text = fmt.Sprintf("LQR-v0, gamma %g: learned policy mean after %d steps vs the Riccati policy", c.Gamma, c.Steps)
	p.X.Label.Text = "x"
	p.Y.Label.Text = "u(x)"
	p.Legend.Top = true
	x0 := c.Params.X0
	opt := plotter.XYs{{X: -x0, Y: r.K * x0}, {X: x0, Y: -r.K * x0}}
	l, err := plotter.NewLine(opt)
	if err != nil {
		return err
	}
	l.Color, l.Width, l.Dashes = color.Black, vg.Points(2), []vg.Length{vg.Points(6), vg.Points(3)}
	p.Add(l)
	p.Legend.Add(fmt.Sprintf("-K* x (K* = %.4f)", r.K), l)
	for i, run := range r.Runs {
		xy := make(plotter.XYs, len(run.X))
		for j := range run.X {
			xy[j] = plotter.XY{X: run.X[j], Y: run.U[j]}
		}
		line, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		line.Color, line.Width = colours[(i+1)%len(colours)], vg.Points(1.2)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("seed %d: slope %.4f", run.Seed, run.Slope), line)
	}
	p.Legend.ThumbnailWidth = vg.Points(20)
	p.Legend.Padding = vg.Points(2)
	return p.Save(7*vg.Inch, 5*vg.Inch, path)
}
