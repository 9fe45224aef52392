package diagnose

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// levelRun is a run whose every phase the hook read (exact peaks): held
// memory held(step) between steps, the step peaking peak(step) in
// backward, its forward's input tokens(step).
func levelRun(steps int, held, peak func(int) int64, tokens func(int) int64) []ipc.Message {
	run := newH100Run("level", 7, true)
	add := run.add
	mem := func(alloc, top int64) *ipc.Mem {
		return &ipc.Mem{Allocated: alloc * session.MiB, MaxAllocated: top * session.MiB, Reserved: 90000 * session.MiB, MaxReserved: 90000 * session.MiB}
	}
	for i := range steps {
		h, pk := held(i), peak(i)
		ends := []struct {
			name      string
			end, peak int64
		}{{"zero_grad", h, h}, {"forward", h + pk/2, h + pk/2}, {"loss", h + pk/2, h + pk/2}, {"backward", h, h + pk}, {"step", h, h}}
		for _, e := range ends {
			begin := ipc.Message{Type: ipc.TypePhase, Name: e.name, Step: i, Edge: ipc.EdgeBegin}
			if e.name == "forward" {
				b, n := int64(8), tokens(i)
				begin.Input = &ipc.Input{Batch: &b, Tokens: &n}
			}
			add(begin)
			add(ipc.Message{Type: ipc.TypePhase, Name: e.name, Step: i, Edge: ipc.EdgeEnd, Mem: mem(e.end, e.peak)})
		}
	}
	add(ipc.Message{Type: ipc.TypeGoodbye, Reason: "exit"})
	return run.msgs
}

// A rise after a steady stretch is a level change at its step, with its
// causes in numbers; not a warmup of the first steps, not a leak; the need
// is the new level's and the headline names the change.
func TestALateRiseIsALevelChange(t *testing.T) {
	const at = 60
	for _, c := range []struct {
		name   string
		held   func(int) int64
		peak   func(int) int64
		tokens func(int) int64
		says   string
	}{
		{"a larger batch", func(int) int64 { return 1900 },
			func(i int) int64 { return map[bool]int64{true: 2000, false: 4000}[i < at] },
			func(i int) int64 { return map[bool]int64{true: 2048, false: 4096}[i < at] }, "input 2048→4096 tokens (2.0×)"},
		{"a new buffer", func(i int) int64 { return map[bool]int64{true: 1900, false: 3436}[i < at] },
			func(int) int64 { return 2000 }, func(int) int64 { return 2048 }, "kept across steps +1536 MiB"},
	} {
		s, p := storeOf(t, levelRun(200, c.held, c.peak, c.tokens), false)
		d := Diagnose(s, p)
		if len(d.Levels) != 1 || d.Levels[0].Step != at {
			t.Fatalf("%s: level changes %+v, want one at step %d (%s)", c.name, d.Levels, at, d.Headline())
		}
		if d.Pattern == PatternGrowth || d.Pattern == PatternWarmup && d.SteadyFrom < at {
			t.Errorf("%s: %s steady from %d: %s", c.name, d.Pattern, d.SteadyFrom, d.Headline())
		}
		want := session.Bytes((c.held(at+1) + c.peak(at+1)) * session.MiB)
		if d.Need.Allocated != want {
			t.Errorf("%s: need %d MiB, want the new level's %d", c.name, d.Need.Allocated/session.MiB, want/session.MiB)
		}
		h := d.Headline()
		if !strings.HasPrefix(h, "level change at step 60: ") || !strings.Contains(h, c.says) || strings.Contains(h, "possible leak") || strings.Contains(h, "warmup") {
			t.Errorf("%s: headline %q", c.name, h)
		}
	}
}

// Memory kept across steps for 100 steps, then no more (a cache that
// fills): one level change over the whole rise, settled where it stopped,
// not a change every LevelMinSteps steps of the few MiB each rose by.
func TestARiseThatStopsIsOneLevelChange(t *testing.T) {
	held := func(i int) int64 { return 1900 + 8*int64(min(max(i-60, 0), 100)) }
	s, p := storeOf(t, levelRun(400, held, func(int) int64 { return 2000 }, func(int) int64 { return 2048 }), false)
	d := Diagnose(s, p)
	if d.Pattern == PatternGrowth || len(d.Levels) != 1 {
		t.Fatalf("%s, %d level changes: %s", d.Pattern, len(d.Levels), d.Headline())
	}
	c := d.Levels[0]
	if c.Step < 60 || c.Step > 64 || c.Settled < 150 || c.Settled > 160 ||
		absDiff(c.HeldTo-c.HeldFrom, mibs(800)) > mibs(40) {
		t.Errorf("change %+v", c)
	}
	if h := d.Headline(); !strings.HasPrefix(h, "level change at step ") || !strings.Contains(h, "not a leak") {
		t.Errorf("headline %q", h)
	}
}

// A fall to a lower level after a steady stretch (layers frozen: their
// gradients and optimizer state let go; the batch halved) is a level
// change too, told as a fall; the need and the steady peak are the new
// level's. A level that wobbles within itself, and a single low step, are
// no fall.
func TestALateFallIsALevelChange(t *testing.T) {
	const at = 120
	lower := func(hi, lo int64) func(int) int64 {
		return func(i int) int64 { return map[bool]int64{true: hi, false: lo}[i < at] }
	}
	flat := func(v int64) func(int) int64 { return func(int) int64 { return v } }
	for _, c := range []struct {
		name       string
		held, peak func(int) int64
		tokens     func(int) int64
		fall       bool
		says       string
	}{
		// step 0 holds no optimizer state yet: a warmup that rose to the
		// first level, not a high of the first steps above the newest
		{"layers frozen", func(i int) int64 { return map[bool]int64{true: 1900, false: lower(3436, 1900)(i)}[i == 0] },
			flat(2000), flat(2048), true, "no longer kept across steps −1536 MiB"},
		{"the batch halved", flat(1900), lower(4000, 2000), lower(4096, 2048), true, "input 4096→2048 tokens (0.5×)"},
		{"a level that wobbles", flat(1900), func(i int) int64 { return 4000 + int64(i%2)*200 }, flat(2048), false, ""},
		{"one low step", flat(1900), func(i int) int64 { return map[bool]int64{true: 1000, false: 4000}[i == at] }, flat(2048), false, ""},
	} {
		s, p := storeOf(t, levelRun(240, c.held, c.peak, c.tokens), false)
		d := Diagnose(s, p)
		if !c.fall {
			if len(d.Levels) != 0 || d.Pattern == PatternGrowth {
				t.Errorf("%s: %s, level changes %+v: %s", c.name, d.Pattern, d.Levels, d.Headline())
			}
			continue
		}
		if len(d.Levels) != 1 || !d.Levels[0].Fall || d.Levels[0].Step != at {
			t.Fatalf("%s: level changes %+v, want one fall at step %d (%s)", c.name, d.Levels, at, d.Headline())
		}
		want := session.Bytes((c.held(at+1) + c.peak(at+1)) * session.MiB)
		if d.Need.Allocated != want || d.SteadyFrom != at || d.Pattern == PatternGrowth {
			t.Errorf("%s: %s since %d, need %d MiB, want the new level's %d since %d", c.name, d.Pattern, d.SteadyFrom,
				d.Need.Allocated/session.MiB, want/session.MiB, at)
		}
		h := d.Headline()
		if !strings.HasPrefix(h, "level change at step 120: ") || !strings.Contains(h, c.says) || !strings.Contains(h, "lower level") ||
			strings.Contains(h, "first steps peaked") {
			t.Errorf("%s: headline %q", c.name, h)
		}
	}
}

// A leak that starts after a rise to a new level (the backbone unfrozen
// at step 100: gradients and optimizer state kept; a list of losses kept
// from step 150): the growth is read from where the rise settled, its
// onset and rate the leak's, and the rise stays a level change; one line
// through both put the onset before the rise and doubled the rate. The
// figures of the truth corpus's unfreeze kind.
func TestALeakAfterALevelChangeIsReadAfterIt(t *testing.T) {
	held := func(i int) int64 {
		h := int64(546)
		if i >= 100 {
			h = 1899
		}
		if i >= 150 {
			h += 4 * int64(i-149)
		}
		return h
	}
	above := func(i int) int64 { // the backward's peak over the held memory
		switch {
		case i < 100:
			return 2486
		case i == 100: // held memory rose in its update: its peak is the old level's
			return 3032 - 1899
		}
		return 2035
	}
	s, p := storeOf(t, levelRun(300, held, above, func(int) int64 { return 2048 }), false)
	d := Diagnose(s, p)
	if d.Pattern != PatternGrowth || d.GrowthKind != GrowthLeak || d.GrowthFrom < 148 || d.GrowthFrom > 152 ||
		absDiff(d.GrowthPerStep, mibs(4)) > mibs(4)/50 {
		t.Fatalf("%s %s from step %d at %s/step, want a leak from step 150 at 4 MiB/step: %s",
			d.Pattern, d.GrowthKind, d.GrowthFrom, d.GrowthPerStep.Human(), d.Headline())
	}
	if len(d.Levels) != 1 || d.Levels[0].Step != 100 || d.Levels[0].Fall {
		t.Errorf("level changes %+v, want the rise at step 100", d.Levels)
	}
}
