//go:build cgo

package nvmlprobe

import (
	"math"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vramscope/vramscope/probe"
)

func TestGarbledProcessEntriesRejected(t *testing.T) {
	for _, api := range []string{"detail", "compute"} {
		t.Run(api, func(t *testing.T) {
			lib := newFakeLib(1)
			f := lib.devs[0]
			if api == "compute" {
				lib.missing[symProcessDetail] = true
			}
			// What a struct mismatch produces: GpuInstanceId (0xFFFFFFFF
			// outside MIG) read as a pid, zero pids, and pids read as sizes.
			f.setProcesses(
				nvml.ProcessInfo{Pid: 1234, UsedGpuMemory: 2 * gib},
				nvml.ProcessInfo{Pid: math.MaxUint32, UsedGpuMemory: 0},
				nvml.ProcessInfo{Pid: 0, UsedGpuMemory: 1234},
				nvml.ProcessInfo{Pid: 5678, UsedGpuMemory: 1 << 50},
				nvml.ProcessInfo{Pid: 777, UsedGpuMemory: math.MaxUint64}, // size not available
				nvml.ProcessInfo{Pid: 1234, UsedGpuMemory: gib},           // second MIG instance
			)
			s := openFake(t, lib)
			got := sampleOnce(t, s, true)[0].Processes
			want := []probe.Process{{PID: 1234, Used: 3 * gib}, {PID: 777, Used: -1}}
			if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
				t.Fatalf("processes %+v, want %+v", got, want)
			}
			if st := s.Status(); !strings.Contains(st, "3 garbled process entries dropped") {
				t.Errorf("Status %q does not count the dropped entries", st)
			}
			detail, compute := len(f.GetRunningProcessDetailListCalls()), len(f.GetComputeRunningProcessesCalls())
			if (api == "detail") != (detail == 1 && compute == 0) || (api == "compute") != (detail == 0 && compute == 1) {
				t.Errorf("calls: detail %d, compute %d", detail, compute)
			}
		})
	}
}

func TestGarbledListOverDeviceTotalDropped(t *testing.T) {
	lib := newFakeLib(1)
	// each entry is plausible, together they exceed the device's 80 GiB
	lib.devs[0].setProcesses(nvml.ProcessInfo{Pid: 10, UsedGpuMemory: 50 * gib}, nvml.ProcessInfo{Pid: 11, UsedGpuMemory: 40 * gib})
	s := openFake(t, lib)
	got := sampleOnce(t, s, true)[0]
	if got.Processes == nil || len(got.Processes) != 0 {
		t.Fatalf("processes %+v, want empty", got.Processes)
	}
	if probe.ProcessesVisible(probe.Device{}, got) {
		t.Error("an emptied list with memory in use should read as not visible")
	}
}

func TestProcessDetailFallsBackToComputeOnce(t *testing.T) {
	lib := newFakeLib(1)
	f := lib.devs[0]
	f.setProcesses(nvml.ProcessInfo{Pid: 4242, UsedGpuMemory: gib})
	f.detailRet = nvml.ERROR_FUNCTION_NOT_FOUND
	s := openFake(t, lib)
	for i := 0; i < 3; i++ {
		got := sampleOnce(t, s, true)[0].Processes
		if len(got) != 1 || got[0] != (probe.Process{PID: 4242, Used: gib}) {
			t.Fatalf("round %d: %+v", i, got)
		}
	}
	if d, c := len(f.GetRunningProcessDetailListCalls()), len(f.GetComputeRunningProcessesCalls()); d != 1 || c != 3 {
		t.Errorf("calls: detail %d, compute %d; want 1 and 3", d, c)
	}
}

func TestProcessesOnlyWhenAsked(t *testing.T) {
	lib := newFakeLib(1)
	lib.devs[0].setProcesses(nvml.ProcessInfo{Pid: 1, UsedGpuMemory: 1})
	s := openFake(t, lib)
	if got := sampleOnce(t, s, false)[0]; got.Processes != nil {
		t.Errorf("processes read without being asked: %+v", got.Processes)
	}
	if n := len(lib.devs[0].GetRunningProcessDetailListCalls()); n != 0 {
		t.Errorf("process list called %d times", n)
	}
}

// TestMatchReorderedDevices plays CUDA_VISIBLE_DEVICES=5 in a container:
// the hook sees its GPU as CUDA device 0, reports the UUID as PyTorch does
// (no "GPU-" prefix, here upper case), its own pid 42 and NSpid [98765 42].
func TestMatchReorderedDevices(t *testing.T) {
	srv, fakes := newDGX()
	for i, f := range fakes {
		f.setProcesses(nvml.ProcessInfo{Pid: uint32(1000 + i), UsedGpuMemory: gib})
	}
	fakes[5].setProcesses(nvml.ProcessInfo{Pid: 42, UsedGpuMemory: gib}, nvml.ProcessInfo{Pid: 98765, UsedGpuMemory: 5 * gib})
	s := openFake(t, srv)
	devs, _ := s.Devices()
	hookUUID := strings.ToUpper(strings.TrimPrefix(devs[5].UUID, "GPU-"))

	d, ok := probe.MatchDevice(devs, hookUUID)
	if !ok || d.Index != 5 {
		t.Fatalf("MatchDevice = %+v, %v; want NVML index 5", d, ok)
	}
	if d0, _ := probe.MatchDevice(devs, devs[0].UUID); d0.Index == d.Index {
		t.Fatal("devices not told apart")
	}
	var smp probe.Sample
	for _, x := range sampleOnce(t, s, true) {
		if x.Device == d.UUID {
			smp = x
		}
	}
	// host pid first: pid 42 on the host is another process
	if used, ok := probe.ProcessUsed(smp, 42, []int{98765, 42}); !ok || used != 5*gib {
		t.Errorf("ProcessUsed = %d, %v; want 5 GiB by host pid", used, ok)
	}
	if used, ok := probe.ProcessUsed(smp, 42, nil); !ok || used != gib {
		t.Errorf("ProcessUsed without NSpid = %d, %v; want 1 GiB", used, ok)
	}
}

func TestSampleSteadyStateAllocatesNothing(t *testing.T) {
	srv, fakes := newDGX()
	for i, f := range fakes {
		f.setProcesses(nvml.ProcessInfo{Pid: uint32(100 + i), UsedGpuMemory: gib}, nvml.ProcessInfo{Pid: uint32(200 + i), UsedGpuMemory: 2 * gib})
	}
	s := openFake(t, srv)
	buf, _ := s.Sample(nil, true)
	allocs := testing.AllocsPerRun(200, func() {
		buf, _ = s.Sample(buf, true)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per round, want 0", allocs)
	}
	if len(buf) != 8 || len(buf[7].Processes) != 2 || buf[7].Processes[1].PID != 207 {
		t.Errorf("samples: %+v", buf[7])
	}
}

// BenchmarkSampleRound measures one round over go-nvml's 8-GPU DGX A100
// mock with two processes per GPU and the process list read.
func BenchmarkSampleRound(b *testing.B) {
	srv, fakes := newDGX()
	for i, f := range fakes {
		f.setProcesses(nvml.ProcessInfo{Pid: uint32(100 + i), UsedGpuMemory: gib}, nvml.ProcessInfo{Pid: uint32(200 + i), UsedGpuMemory: 2 * gib})
	}
	s, err := New(WithInterface(srv))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	buf, _ := s.Sample(nil, true)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf, _ = s.Sample(buf, true)
	}
}
