package diagnose

import "github.com/vramscope/vramscope/session"

// MaxTurn is the most steps a turn of several models may take: a WGAN's
// critic updates five times (n_critic) for each update of its generator.
const MaxTurn = 8

// turns returns pk with the steps of several models that take turns (a
// GAN's D and G, an actor and a critic, each watch's steps named after it:
// the names repeat with a period of 2 to MaxTurn steps over all of pk)
// folded into one summary a turn: the turn's highest step, holding the
// memory held after the turn's last step. Such models' steps peak at
// levels of their own, which are no noise about one level: a turn of them
// all is what repeats, and what the classifier reads as a step. pk itself
// when one name (or none) names every step, or the names keep no period.
// It also returns the turn's length in steps, 0 when pk is returned as it is.
func turns(pk []session.StepPeak) ([]session.StepPeak, int) {
	if len(pk) < 2 || !named(pk) {
		return pk, 0
	}
	c := turnLength(pk)
	if c == 0 {
		return pk, 0
	}
	base := pk[0].Index
	out := make([]session.StepPeak, 0, len(pk)/c+1)
	for i := 0; i < len(pk); {
		turn, top, j := (pk[i].Index-base)/c, i, i
		for ; j < len(pk) && (pk[j].Index-base)/c == turn; j++ {
			if pk[j].PeakAllocated > pk[top].PeakAllocated {
				top = j
			}
		}
		sp := pk[top]
		sp.Held = pk[j-1].Held
		out = append(out, sp)
		i = j
	}
	return out, c
}

// named reports whether pk's steps carry more than one model name.
func named(pk []session.StepPeak) bool {
	for i := range pk {
		if pk[i].Model != pk[0].Model {
			return true
		}
	}
	return false
}

// turnLength is the shortest period, 2 to MaxTurn steps, at which the
// model names of pk repeat (by step index: a step left out, failed or
// without data, keeps its place), 0 when none does.
func turnLength(pk []session.StepPeak) int {
	base := pk[0].Index
	var names [MaxTurn]string
	var seen [MaxTurn]bool
	for c := 2; c <= MaxTurn; c++ {
		clear(seen[:])
		ok := true
		for i := range pk {
			k := (pk[i].Index - base) % c
			if !seen[k] {
				names[k], seen[k] = pk[i].Model, true
			} else if names[k] != pk[i].Model {
				ok = false
				break
			}
		}
		if ok {
			return c
		}
	}
	return 0
}
