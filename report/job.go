package report

import (
	"cmp"
	"slices"
	"sort"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/session"
)

// JobSchema names the JSON layout of a job's report (docs/report.md, "One
// report for a job"). Additive changes keep it.
const JobSchema = "vramscope.job-report/v1"

// JobView is one report for a job's ranks, from many recordings (one per
// node, in any order): every rank's need, steady peak, held memory and
// pattern, the imbalance between them and the ranks that leak. It is
// built from each recording's Report, so its figures are the ones the
// single-recording report states.
type JobView struct {
	Schema string `json:"schema"`
	// Recordings are the files read, in the order given.
	Recordings []string `json:"recordings"`
	// Jobs are the job ids the ranks name, sorted ("" left out).
	Jobs []string `json:"jobs"`
	// Ranks are the training processes, by job, rank, host and pid.
	Ranks []Rank `json:"ranks"`
	// Imbalance compares the largest need with the median; nil with fewer
	// than two ranks whose need is known (exact or inferred).
	Imbalance *Imbalance `json:"imbalance"`
	// Leaking are the ranks whose step peaks grow with the memory they
	// hold between steps (pattern growth, kind leak), largest rate first.
	Leaking []Leaking `json:"leaking"`
}

// Rank is one training process of the job.
type Rank struct {
	RankRef
	Session   string `json:"session"`
	WorldSize *int   `json:"world_size"`
	Job       *Job   `json:"job"`
	// Steps is the finished steps the diagnosis looked at.
	Steps   int              `json:"steps"`
	Pattern diagnose.Pattern `json:"pattern"`
	// Need is the memory the rank needs (diagnosis.need.allocated) and
	// NeedKnown how: exact, inferred, or bound (a lower bound, never the
	// need). NeedSteady says it is the steady state's peak.
	Need       session.Bytes     `json:"need"`
	NeedKnown  session.Exactness `json:"need_known"`
	NeedSteady bool              `json:"need_steady"`
	// SteadyPeak is the steady state's allocated peak (patterns steady and
	// warmup), null otherwise.
	SteadyPeak session.Bytes `json:"steady_peak"`
	// Held is the memory held between steps at the newest finished step.
	Held session.Bytes `json:"held"`
	// PeakPhase is the phase of the rank's session peak.
	PeakPhase string `json:"peak_phase"`
	// Growth is how the peaks grow while the pattern is growth, nil
	// otherwise.
	Growth *Growth `json:"growth"`
}

// Leaking is a rank that leaks, and how fast.
type Leaking struct {
	RankRef
	Growth Growth `json:"growth"`
}

// RankRef names a rank: the recording it is in, its host, pid and rank.
type RankRef struct {
	Recording string `json:"recording"`
	Host      string `json:"host"`
	PID       int    `json:"pid"`
	Rank      *int   `json:"rank"`
}

// Growth is how a growing rank grows (diagnosis growth fields).
type Growth struct {
	Kind        string        `json:"kind"`
	PerStep     session.Bytes `json:"per_step"`
	HeldPerStep session.Bytes `json:"held_per_step"`
	From        int           `json:"from_step"`
}

// Imbalance is the job's largest need against its median need.
type Imbalance struct {
	// Largest is the rank with the largest need, Phase where its session
	// peak happened.
	Largest RankRef       `json:"largest"`
	Phase   string        `json:"phase"`
	Need    session.Bytes `json:"need"`
	// Median is the median need (the mean of the middle two of an even
	// count) of Ranks ranks, Ratio Need / Median.
	Median session.Bytes `json:"median"`
	Ratio  float64       `json:"ratio"`
	Ranks  int           `json:"ranks"`
}

// NewJobView returns an empty view; Add each recording's ranks, then
// Finish.
func NewJobView() *JobView {
	return &JobView{Schema: JobSchema, Recordings: []string{}, Jobs: []string{}, Ranks: []Rank{}, Leaking: []Leaking{}}
}

// RanksOf is one row per process of one recording's report; name is the
// file. The report can be dropped afterwards.
func RanksOf(name string, r *Report) []Rank {
	out := make([]Rank, 0, r.processCount())
	r.eachProcess(func(p *Process) error {
		out = append(out, rankOf(name, p))
		return nil
	})
	return out
}

// Add takes the rows of one recording (RanksOf), in the order the
// recordings were given.
func (v *JobView) Add(name string, ranks []Rank) {
	v.Recordings = append(v.Recordings, name)
	v.Ranks = append(v.Ranks, ranks...)
}

func rankOf(name string, p *Process) Rank {
	d := &p.Diagnosis.Diagnosis
	r := Rank{
		RankRef: RankRef{Recording: name, Host: p.Host, PID: p.PID, Rank: p.Rank},
		Session: p.Session, WorldSize: p.WorldSize, Job: p.Job,
		Steps: d.Steps, Pattern: d.Pattern,
		Need: d.Need.Allocated, NeedKnown: d.Need.AllocatedKnown.Is, NeedSteady: d.Need.Steady,
		SteadyPeak: session.Unknown, Held: d.Held.Last, PeakPhase: p.Totals.PeakAllocatedPhase,
	}
	if d.Pattern == diagnose.PatternSteady || d.Pattern == diagnose.PatternWarmup {
		r.SteadyPeak = d.PeakAfter
	}
	if d.Pattern == diagnose.PatternGrowth {
		r.Growth = &Growth{Kind: d.GrowthKind, PerStep: d.GrowthPerStep, HeldPerStep: d.HeldPerStep, From: d.GrowthFrom}
	}
	return r
}

// Finish orders the ranks and works out the jobs, the imbalance and the
// leaking ranks.
func (v *JobView) Finish() *JobView {
	slices.SortStableFunc(v.Ranks, func(a, b Rank) int {
		if c := cmp.Compare(jobID(a.Job), jobID(b.Job)); c != 0 {
			return c
		}
		if c := cmp.Compare(rankKey(a.Rank), rankKey(b.Rank)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Host, b.Host); c != 0 {
			return c
		}
		return cmp.Compare(a.PID, b.PID)
	})
	seen := map[string]bool{}
	var stated []*Rank
	var leaking []*Rank
	for i := range v.Ranks {
		r := &v.Ranks[i]
		if id := jobID(r.Job); id != "" && !seen[id] {
			seen[id] = true
			v.Jobs = append(v.Jobs, id)
		}
		if r.Need.Known() && r.NeedKnown.Stated() {
			stated = append(stated, r)
		}
		if r.Growth != nil && r.Growth.Kind == diagnose.GrowthLeak {
			leaking = append(leaking, r)
		}
	}
	sort.Strings(v.Jobs)
	sort.SliceStable(leaking, func(i, j int) bool { return leaking[i].Growth.PerStep > leaking[j].Growth.PerStep })
	for _, r := range leaking {
		v.Leaking = append(v.Leaking, Leaking{RankRef: r.RankRef, Growth: *r.Growth})
	}
	v.Imbalance = imbalanceOf(stated)
	return v
}

// imbalanceOf is the largest need against the median of rs (nil with
// fewer than two ranks).
func imbalanceOf(rs []*Rank) *Imbalance {
	if len(rs) < 2 {
		return nil
	}
	needs := make([]session.Bytes, len(rs))
	top := rs[0]
	for i, r := range rs {
		needs[i] = r.Need
		if r.Need > top.Need {
			top = r
		}
	}
	slices.Sort(needs)
	n := len(needs)
	median := needs[n/2]
	if n%2 == 0 {
		median = (needs[n/2-1] + needs[n/2]) / 2
	}
	im := &Imbalance{Largest: top.RankRef, Phase: top.PeakPhase, Need: top.Need, Median: median, Ranks: n}
	if median > 0 {
		im.Ratio = float64(top.Need) / float64(median)
	}
	return im
}

func jobID(j *Job) string {
	if j == nil {
		return ""
	}
	return j.ID
}

// rankKey orders ranks by number, those without one last.
func rankKey(r *int) int {
	if r == nil {
		return int(^uint(0) >> 1)
	}
	return *r
}
