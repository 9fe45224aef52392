package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/session"
)

// processSelectors is what a --process flag accepts, for the flags' help.
const processSelectors = "pid, rank:N, session id or #N"

// pickProcess finds a process of a recording by a selector: "" (the only
// process with steps, or the first), a pid, "rank:N", "#N" (position) or
// a hook session id.
func pickProcess(s *session.Store, sel, path string) (*session.Process, error) {
	ps := s.Processes()
	if len(ps) == 0 {
		return nil, fmt.Errorf("%s: no training process in the recording", path)
	}
	switch {
	case sel == "":
		for _, p := range ps {
			if len(p.StepPeaks()) > 0 {
				return p, nil
			}
		}
		return ps[0], nil
	case strings.HasPrefix(sel, "#"):
		if i, err := strconv.Atoi(sel[1:]); err == nil && i >= 0 && i < len(ps) {
			return ps[i], nil
		}
	case strings.HasPrefix(sel, "rank:"):
		if r, err := strconv.Atoi(sel[5:]); err == nil {
			for _, p := range ps {
				if p.Hello.Rank != nil && *p.Hello.Rank == r {
					return p, nil
				}
			}
		}
	default:
		if p := s.Process(sel); p != nil {
			return p, nil
		}
		if pid, err := strconv.Atoi(sel); err == nil {
			for _, p := range ps {
				if p.Hello.PID == pid {
					return p, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("%s: no process %q (%d processes: pick by pid, rank:N, #N or session id)", path, sel, len(ps))
}

// plotProcess is the process to draw: the one picked, else the one with
// the highest allocated peak.
func plotProcess(s *session.Store, sel, path string) (*session.Process, error) {
	if sel != "" {
		return pickProcess(s, sel, path)
	}
	var best *session.Process
	for _, p := range s.Processes() {
		if best == nil || p.MaxAllocated.Max() > best.MaxAllocated.Max() {
			best = p
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%s: no training process in the recording", path)
	}
	return best, nil
}
