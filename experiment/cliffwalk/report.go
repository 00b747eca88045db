package cliffwalk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WriteTableHeader writes the header of the text table for agents.
func WriteTableHeader(w io.Writer, agents []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%3s %8s", "n", "memory")
	for _, a := range agents {
		fmt.Fprintf(&b, " %16s", a)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteTableRow writes one row of the text table: n, the memory size and
// each agent's median number of updates, with "(k capped)" when k runs hit
// the cap and "-" for a skipped agent.
func WriteTableRow(w io.Writer, r Row) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%3d %8d", r.N, r.Memory)
	for _, c := range r.Cells {
		var s string
		switch {
		case c.Skipped:
			s = "-"
		case c.Capped > 0:
			s = fmt.Sprintf("%.0f (%d capped)", c.Median, c.Capped)
		default:
			s = fmt.Sprintf("%.0f", c.Median)
		}
		fmt.Fprintf(&b, " %16s", s)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteTable writes the whole text table of res.
func WriteTable(w io.Writer, res *Result) error {
	if err := WriteTableHeader(w, res.Agents); err != nil {
		return err
	}
	for _, r := range res.Rows {
		if err := WriteTableRow(w, r); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON writes res as indented JSON to path.
func WriteJSON(res *Result, path string) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep "->" readable in Notes
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// Capped is the total number of runs of res that hit the update cap.
func (res *Result) Capped() int {
	k := 0
	for _, r := range res.Rows {
		for _, c := range r.Cells {
			k += c.Capped
		}
	}
	return k
}

// SavePlot draws the paper's Figure 1 (right) for res: the median number of
// updates against the memory size, log-log, one line per agent, with the
// per-n minimum and maximum over seeds as faint dashed lines. The format
// follows path's extension (.png, .svg, .pdf).
func SavePlot(res *Result, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Blind Cliffwalk: updates until MSE(Q, Q*) < %g (n = %d..%d, median of %d seeds)",
		res.Config.Threshold, res.Config.NMin, res.Config.NMax, res.Config.Seeds)
	p.X.Label.Text = "replay memory size N = 2^(n+1) - 2"
	// gonum pads the plot's top by half a long rotated label; keep it short.
	p.Y.Label.Text = "updates"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{}, plot.LogTicks{}
	// Bottom right is empty: the oracle's line is flat there.
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(8), vg.Points(8)
	for i, name := range res.Agents {
		var med, lo, hi plotter.XYs
		for _, r := range res.Rows {
			c := r.Cells[i]
			if c.Skipped {
				continue
			}
			x := float64(r.Memory)
			// Log axes cannot show 0; a run can only take 0 updates if its
			// initial table already meets the threshold.
			med = append(med, plotter.XY{X: x, Y: math.Max(c.Median, 1)})
			lo = append(lo, plotter.XY{X: x, Y: math.Max(float64(c.Min), 1)})
			hi = append(hi, plotter.XY{X: x, Y: math.Max(float64(c.Max), 1)})
		}
		if len(med) == 0 {
			continue
		}
		col := palette[i%len(palette)]
		line, pts, err := plotter.NewLinePoints(med)
		if err != nil {
			return err
		}
		line.Color, line.Width = col, vg.Points(1.5)
		pts.Color, pts.Shape = col, plotutil.Shape(i)
		p.Add(line, pts)
		p.Legend.Add(name, line, pts)
		for _, xy := range []plotter.XYs{lo, hi} {
			l, err := plotter.NewLine(xy)
			if err != nil {
				return err
			}
			l.Color = faint(col)
			l.Width = vg.Points(0.75)
			l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
			p.Add(l)
		}
	}
	key, err := plotter.NewLine(plotter.XYs{})
	if err != nil {
		return err
	}
	key.Color, key.Width = color.Gray{Y: 140}, vg.Points(0.75)
	key.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	p.Legend.Add("min, max", key)
	if res.Capped() > 0 {
		l := capLine(res)
		p.Add(l)
		p.Legend.Add("update cap", l)
	}
	// Whole decades: LogTicks labels the powers of ten around the range,
	// and a label beyond it would pad the plot.
	p.X.Min, p.X.Max = decadeBelow(p.X.Min), decadeAbove(p.X.Max)
	p.Y.Min, p.Y.Max = decadeBelow(p.Y.Min), decadeAbove(p.Y.Max)
	return p.Save(7*vg.Inch, 5*vg.Inch, path)
}

// capLine marks the update cap, so medians pressed against it read as
// lower bounds.
func capLine(res *Result) *plotter.Line {
	first, last := res.Rows[0].Memory, res.Rows[len(res.Rows)-1].Memory
	y := float64(res.Config.MaxUpdates)
	l, _ := plotter.NewLine(plotter.XYs{{X: float64(first), Y: y}, {X: float64(last), Y: y}})
	l.Color = color.Gray{Y: 128}
	l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
	return l
}

// palette holds the agents' colours (black for the first, uniform, as in
// the paper's figure).
var palette = []color.NRGBA{
	{0, 0, 0, 255},
	{214, 39, 40, 255},
	{31, 119, 180, 255},
	{255, 127, 14, 255},
	{148, 103, 189, 255},
	{44, 160, 44, 255},
	{140, 86, 75, 255},
	{227, 119, 194, 255},
}

func faint(c color.NRGBA) color.NRGBA {
	c.A = 80
	return c
}

func decadeBelow(v float64) float64 { return math.Pow(10, math.Floor(math.Log10(v))) }
func decadeAbove(v float64) float64 { return math.Pow(10, math.Ceil(math.Log10(v))) }
