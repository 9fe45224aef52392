package report

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/session"
)

// WriteText writes the job view for a terminal: one line per rank, then
// the imbalance and the leaking ranks. Text from the hooks or the files
// (hosts, job ids, file names) is escaped by textesc.
func (v *JobView) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	jobs := "no job named"
	if len(v.Jobs) > 0 {
		jobs = "job " + textesc.Strings(v.Jobs, ", job ")
	}
	fmt.Fprintf(bw, "vramscope job report · %s · %s · %s\n", jobs,
		plural(len(v.Recordings), "recording", "recordings"), plural(len(v.Ranks), "rank", "ranks"))
	fmt.Fprintf(bw, "\n%6s  %-20s %8s  %-8s %12s %12s %10s  %s\n", "rank", "host", "pid", "pattern", "need MiB", "steady MiB", "held MiB", "peak in")
	for i := range v.Ranks {
		r := &v.Ranks[i]
		fmt.Fprintf(bw, "%6s  %-20s %8d  %-8s %12s %12s %10s  %s\n", rankText(r.Rank), textesc.String(r.Host), r.PID, r.Pattern,
			needText(r.Need, r.NeedKnown), r.SteadyPeak.MiBString(), r.Held.MiBString(), orDash(textesc.String(r.PeakPhase)))
	}
	bw.WriteString("\n")
	if im := v.Imbalance; im != nil {
		fmt.Fprintf(bw, "imbalance: %s needs %s MiB, %.2f× the median %s MiB of %d ranks (its peak in %s)\n",
			refText(im.Largest), im.Need.MiBString(), im.Ratio, im.Median.MiBString(), im.Ranks, orDash(textesc.String(im.Phase)))
	} else {
		bw.WriteString("imbalance: fewer than two ranks with a known need\n")
	}
	if len(v.Leaking) == 0 {
		bw.WriteString("leaking: none\n")
	}
	for _, l := range v.Leaking {
		fmt.Fprintf(bw, "leaking: %s grows %s MiB a step since step %d (held %s MiB a step)\n",
			refText(l.RankRef), perStep(l.Growth.PerStep), l.Growth.From, perStep(l.Growth.HeldPerStep))
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write job report: %w", err)
	}
	return nil
}

func rankText(r *int) string {
	if r == nil {
		return "–"
	}
	return strconv.Itoa(*r)
}

// needText is a need as it may be stated: a bound is "≥ N".
func needText(b session.Bytes, k session.Exactness) string {
	if b.Known() && !k.Stated() {
		return "≥" + b.MiBString()
	}
	return b.MiBString()
}

func refText(r RankRef) string {
	return fmt.Sprintf("rank %s on %s (pid %d, %s)", rankText(r.Rank), textesc.String(r.Host), r.PID, textesc.String(r.Recording))
}

// perStep writes a per-step rate in MiB with one decimal.
func perStep(b session.Bytes) string {
	if !b.Known() {
		return "–"
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(b)/float64(session.MiB)), ".0")
}
