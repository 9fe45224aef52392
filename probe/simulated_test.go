package probe

import (
	"reflect"
	"testing"
	"time"
)

const mib = 1 << 20

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time           { return c.t }
func (c *fakeClock) add(d time.Duration)      { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock                { return &fakeClock{t: time.Date(2025, 11, 22, 7, 0, 0, 0, time.UTC)} }
func sim1(s *Simulated, withProc bool) Sample { out, _ := s.Sample(nil, withProc); return out[0] }

func TestSimulatedProcessesAndContext(t *testing.T) {
	clk := newFakeClock()
	s := NewSimulated(WithSimClock(clk.now), WithOtherProcess(9001, 2<<30))
	devs, _ := s.Devices()
	if len(devs) != 1 || devs[0].UUID != SimulatedUUID || devs[0].Total != 80<<30 {
		t.Fatalf("devices %+v", devs)
	}

	if got := sim1(s, true); got.Used != 2<<30 || len(got.Processes) != 1 || got.Util != 0 {
		t.Fatalf("before any rank: %+v", got)
	}
	steps := []struct {
		rank     int
		reserved int64
		ctx      int64 // rank's context after this report
	}{
		{0, 1000 * mib, SimContext + SimContextGrowth},   // first report is a new high
		{0, 800 * mib, SimContext + SimContextGrowth},    // lower: no new kernels
		{0, 1200 * mib, SimContext + 2*SimContextGrowth}, // new high
		{0, 1200 * mib, SimContext + 2*SimContextGrowth}, // same: not a new high
		{0, 3000 * mib, SimContext + 3*SimContextGrowth}, // third new high
		{0, 5000 * mib, SimContext + 3*SimContextGrowth}, // growth capped
		{1, 100 * mib, SimContext + SimContextGrowth},    // a second rank
	}
	for i, st := range steps {
		clk.add(100 * time.Millisecond)
		s.OnMem(st.rank, clk.now(), st.reserved)
		got := sim1(s, true)
		var rank Process
		for _, p := range got.Processes {
			if p.PID == SimulatedPIDBase+st.rank {
				rank = p
			}
		}
		if rank.Used != st.reserved+st.ctx {
			t.Errorf("step %d: rank %d used %d MiB, want %d MiB", i, st.rank, rank.Used/mib, (st.reserved+st.ctx)/mib)
		}
		var sum int64
		for _, p := range got.Processes {
			sum += p.Used
		}
		if got.Used != sum || got.Free != SimulatedTotal-SimDriverReserved-sum || got.Reserved != SimDriverReserved {
			t.Errorf("step %d: device %+v, processes add to %d", i, got, sum)
		}
	}
	got := sim1(s, true)
	if pids := []int{got.Processes[0].PID, got.Processes[1].PID, got.Processes[2].PID}; !reflect.DeepEqual(pids, []int{4242, 4243, 9001}) {
		t.Errorf("pids %v", pids)
	}
	if got.Util != simBusyUtil {
		t.Errorf("util %d while ranks move memory", got.Util)
	}
	clk.add(2 * time.Second)
	if got := sim1(s, false); got.Util != 0 || got.Processes != nil {
		t.Errorf("idle: util %d, processes %v", got.Util, got.Processes)
	}
	s.OnExit(0)
	if got := sim1(s, true); len(got.Processes) != 2 || got.Processes[0].PID != 4243 {
		t.Errorf("after rank 0 exits: %+v", got.Processes)
	}
	_ = s.Close()
	if _, err := s.Sample(nil, false); err == nil {
		t.Error("Sample after Close succeeded")
	}
}

func TestSimulatedDeterministic(t *testing.T) {
	run := func() []Sample {
		clk := newFakeClock()
		s := NewSimulated(WithSimClock(clk.now))
		var out []Sample
		for i := 0; i < 50; i++ {
			clk.add(37 * time.Millisecond)
			s.OnMem(i%3, clk.now(), int64(i*i)*mib%(7<<30))
			smp, _ := s.Sample(nil, i%10 == 0)
			out = append(out, smp[0].Clone())
		}
		return out
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs with the same inputs differ")
	}
}

func TestSimulatedBadInput(t *testing.T) {
	s := NewSimulated(WithSimClock(newFakeClock().now))
	s.OnMem(-1, time.Time{}, 5)
	s.OnMem(2, time.Time{}, -5)
	got := sim1(s, true)
	if len(got.Processes) != 1 || got.Processes[0] != (Process{PID: SimulatedPIDBase + 2, Used: SimContext}) {
		t.Errorf("processes %+v", got.Processes)
	}
}

func TestSimulatedAllocatesNothing(t *testing.T) {
	clk := newFakeClock()
	s := NewSimulated(WithSimClock(clk.now), WithOtherProcess(9001, 1))
	for r := 0; r < 4; r++ {
		s.OnMem(r, clk.now(), 1<<30)
	}
	buf, _ := s.Sample(nil, true)
	if n := testing.AllocsPerRun(100, func() { buf, _ = s.Sample(buf, true) }); n != 0 {
		t.Errorf("%v allocations per round", n)
	}
}
