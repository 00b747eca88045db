package loadtest

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/apexrl/apex/internal/meter"
)

// WriteText writes the report as a table: the load, then each figure with
// its rate and, where the server's CPU time is known, its rate per
// CPU-second.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	if r.Server != "" {
		p("server\t%s\n", r.Server)
	}
	p("table\t%s, capacity %d, %d items at the end\n", r.Method, r.Capacity, r.TableSize)
	paced := "unpaced"
	if r.InsertRate > 0 {
		paced = "paced to " + meter.SI(r.InsertRate) + "/s"
	}
	p("load\t%d insert streams over %d connections (batches of %d, window %d, %s); 1 learner on %d Sample stream(s) (draws of %d, %d in flight per stream)\n",
		r.Streams, r.Conns, r.InsertBatch, r.Window, paced, max(r.SampleStreams, 1), r.SampleBatch, r.SampleInflight)
	p("measured\t%.2f s after %.2f s of warm-up\n", r.DurationSec, r.WarmupSec)
	p("\n")
	p("figure\ttotal\tper s\tper server CPU-s\tper CPU-s (both)\n")
	row := func(name string, n uint64, rate float64, perSrv, perAll *float64) {
		p("%s\t%d\t%s\t%s\t%s\n", name, n, meter.SI(rate), siPtr(perSrv), siPtr(perAll))
	}
	row("inserted transitions", r.Inserted, r.InsertsPerSec, r.InsertsPerServerCPUSec, r.InsertsPerCPUSec)
	row("sampled + written back", r.Sampled, r.SampledPerSec, r.SampledPerServerCPUSec, r.SampledPerCPUSec)
	row("draws", r.Draws, r.DrawsPerSec, nil, nil)
	p("\n")
	p("sample round trip (µs)\tp50 %.0f\tp90 %.0f\tp99 %.0f\tmax %.0f\n", r.SampleRTTP50US, r.SampleRTTP90US, r.SampleRTTP99US, r.SampleRTTMaxUS)
	srv := "not known"
	if r.ServerCPUSec != nil {
		srv = fmt.Sprintf("%.2f", *r.ServerCPUSec)
	}
	p("CPU seconds\tserver %s\tloadtest %.2f\n", srv, r.LoadtestCPUSec)
	if r.StaleWrites > 0 {
		p("stale write-backs\t%d (slots overwritten between draw and write-back)\n", r.StaleWrites)
	}
	return tw.Flush()
}

func siPtr(v *float64) string {
	if v == nil {
		return "-"
	}
	return meter.SI(*v)
}
