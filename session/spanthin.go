package session

import "time"

// thinSlots is how many time slots the older half of the spans is thinned
// to at a compaction, as a fraction of the bound: a chart of 200 columns
// shows no more of them.
const thinSlots = 8

// compactSpans thins the older half of the spans once the bound is
// reached: the older half's time is cut into limit/thinSlots slots and
// each slot keeps its automatic span and its user span of highest
// allocated peak, the phases a chart zoomed that far out shows. Open spans
// (and a forward waiting for its step) are always kept, so an open phase
// as old as the session (a user phase around the whole loop) never blocks
// the compaction. Spans thinned once are thinned again, coarser, at the
// next compaction: the chart keeps every phase of the recent seconds and
// the largest of each stretch before them, in bounded memory.
func (p *Process) compactSpans() {
	if len(p.spans) < p.limits.spans {
		return
	}
	cut := len(p.spans) / 2
	slots := max(p.limits.spans/thinSlots, 1)
	t0, t1 := p.spans[0].Start, p.spans[cut-1].Start
	width := max(t1.Sub(t0)/time.Duration(slots), 1)
	slotOf := func(sp *Span) int64 { return int64(sp.Start.Sub(t0) / width) }

	// keep marks the spans of the older half that stay.
	keep := make([]bool, cut)
	for _, i := range p.open {
		if i < cut {
			keep[i] = true
		}
	}
	if p.pendingFwd >= 0 && p.pendingFwd < cut {
		keep[p.pendingFwd] = true
	}
	best := [2]int{-1, -1} // the best automatic and user span of the slot
	slot := int64(-1)
	for i := 0; i < cut; i++ {
		sp := &p.spans[i]
		if k := slotOf(sp); k != slot {
			slot, best = k, [2]int{-1, -1}
		}
		if keep[i] {
			continue
		}
		u := 0
		if sp.User {
			u = 1
		}
		if b := best[u]; b < 0 || sp.PeakAllocated > p.spans[b].PeakAllocated {
			if b >= 0 {
				keep[b] = false
			}
			best[u], keep[i] = i, true
		}
	}

	// Move the kept spans down, remapping the indices into them: a kept
	// span's new index is the number kept before it (counted for the few
	// open ones, not stored for all: a table of them was 8 KB a
	// compaction, 90 MB of garbage in a report of 64 busy ranks).
	kept := 0
	for i := 0; i < cut; i++ {
		if keep[i] {
			p.spans[kept] = p.spans[i]
			kept++
		}
	}
	remap := func(i int) int {
		if i >= cut {
			return i - cut + kept
		}
		n := 0
		for _, k := range keep[:i] {
			if k {
				n++
			}
		}
		return n
	}
	for k := range p.open {
		p.open[k] = remap(p.open[k])
	}
	if p.pendingFwd >= 0 {
		p.pendingFwd = remap(p.pendingFwd)
	}
	n := copy(p.spans[kept:], p.spans[cut:])
	clear(p.spans[kept+n:])
	p.spans = p.spans[:kept+n]
}
