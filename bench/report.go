package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/apexrl/apex/internal/meter"
)

// WriteText writes the report as a human-readable table.
func (r *Report) WriteText(w io.Writer) error {
	c := r.Config
	var sb strings.Builder
	fmt.Fprintf(&sb, "apex bench: actors=%d batch=%d learner-batch=%d capacity=%d load=%gs solo=%gs seed=%d\n",
		c.Actors, c.Batch, c.LearnerBatch, c.Capacity, c.DurationSec, soloSec(c), c.Seed)
	fmt.Fprintf(&sb, "machine: %s %s/%s, GOMAXPROCS=%d, %d CPUs\n", r.GoVersion, r.GOOS, r.GOARCH, r.GOMAXPROCS, r.NumCPU)
	if r.Interrupted {
		sb.WriteString("INTERRUPTED: the figures measured so far (the phase cut short over the time it ran; phases not run are absent or 0)\n")
	}
	fmt.Fprintf(&sb, "insert path (apex): %s\n", r.InsertPath)
	if r.Baseline != nil {
		fmt.Fprintf(&sb, "insert path (baseline): %s\n", r.Baseline.InsertPath)
	}
	if r.BaselineSamePath != nil {
		fmt.Fprintf(&sb, "insert path (baseline, apex's path): %s\n", r.BaselineSamePath.InsertPath)
	}
	sb.WriteString("\n")

	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := []*Result{&r.Result}
	head := fmt.Sprintf("apex (%d stripes)", r.Stripes)
	if r.Baseline != nil {
		cols = append(cols, r.Baseline)
		head += "\tmutex baseline"
	}
	if r.BaselineSamePath != nil {
		cols = append(cols, r.BaselineSamePath)
		head += "\tbaseline, apex's path"
	}
	row := func(name string, f func(*Result) string) {
		fmt.Fprintf(tw, "%s\t", name)
		for _, res := range cols {
			fmt.Fprintf(tw, "%s\t", f(res))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "\t%s\t\n", head)
	row("inserts/s", func(x *Result) string { return meter.SI(x.InsertsPerSec) })
	row("sampled transitions/s", func(x *Result) string { return meter.SI(x.SamplesPerSec) })
	row("priority updates/s", func(x *Result) string { return meter.SI(x.UpdatesPerSec) })
	row("learner steps/s", func(x *Result) string { return meter.SI(x.LearnerStepsPerSec) })
	row("step p50 µs", func(x *Result) string { return fmt.Sprintf("%.1f", x.LearnerStepP50US) })
	row("step p99 µs", func(x *Result) string { return fmt.Sprintf("%.1f", x.LearnerStepP99US) })
	row("step p99.9 µs", func(x *Result) string { return fmt.Sprintf("%.1f", x.LearnerStepP999US) })
	row("step max µs", func(x *Result) string { return fmt.Sprintf("%.1f", x.LearnerStepMaxUS) })
	row("stale updates dropped", func(x *Result) string {
		if !x.GenerationsTracked {
			return "not tracked"
		}
		return fmt.Sprint(x.StaleUpdatesDropped)
	})
	row("failed learner steps", func(x *Result) string { return fmt.Sprint(x.FailedLearnerSteps) })
	row("torn reads re-drawn", func(x *Result) string { return fmt.Sprint(x.TornReads) })
	row("stratum fallbacks", func(x *Result) string { return fmt.Sprint(x.StratumFallbacks) })
	row("process CPU, cores", func(x *Result) string { return fmt.Sprintf("%.2f", x.CPUCores) })
	row("allocs / GCs in load", func(x *Result) string { return fmt.Sprintf("%d / %d", x.Mallocs, x.GCCycles) })
	if r.SoloSamplesPerSec > 0 {
		row("solo sampled/s", func(x *Result) string { return meter.SI(x.SoloSamplesPerSec) })
		row("solo step p50 µs", func(x *Result) string { return fmt.Sprintf("%.1f", x.SoloLearnerStepP50US) })
		row("solo step p99 µs", func(x *Result) string { return fmt.Sprintf("%.1f", x.SoloLearnerStepP99US) })
		row("solo step p99.9 µs", func(x *Result) string { return fmt.Sprintf("%.1f", x.SoloLearnerStepP999US) })
		row("under load / solo", func(x *Result) string { return fmt.Sprintf("%.2fx", x.LoadToSolo) })
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.ApexToBaseline > 0 {
		fmt.Fprintf(&sb, "\napex / baseline learner rate: %.1fx under load", r.ApexToBaseline)
		if r.ApexToBaselineSamePath > 0 {
			fmt.Fprintf(&sb, " (%.1fx against the baseline on apex's insert path)", r.ApexToBaselineSamePath)
		}
		if r.ApexToBaselineSolo > 0 {
			fmt.Fprintf(&sb, ", %.1fx solo", r.ApexToBaselineSolo)
		}
		sb.WriteString("\n")
	}
	if n := r.Noise; n != nil {
		fmt.Fprintf(&sb, "\nmachine noise (a CPU-only loop of %.1f µs, the learner's median step, timed %d times): p50 %.1f, p99 %.1f, p99.9 %.1f, max %.1f µs\n",
			n.LoopUS, n.Samples, n.P50US, n.P99US, n.P999US, n.MaxUS)
	}
	if r.Interrupted {
		sb.WriteString("\ntargets (apex): not checked, the run was interrupted\n")
		_, err := io.WriteString(w, sb.String())
		return err
	}
	sb.WriteString("\ntargets (apex):\n")
	tw = tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	for _, t := range r.Targets {
		met := "MISSED"
		switch {
		case t.Want == infoTarget:
			met = "(not a target)"
		case t.Met:
			met = "met"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%.4g\t%s\n", t.Name, t.Want, t.Value, met)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

func soloSec(c ConfigJSON) float64 {
	if !c.Solo {
		return 0
	}
	return c.SoloDurationSec
}
