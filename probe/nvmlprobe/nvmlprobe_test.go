//go:build cgo

package nvmlprobe

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vramscope/vramscope/probe"
)

var t0 = time.Date(2025, 11, 22, 7, 0, 0, 0, time.UTC)

func openFake(t *testing.T, lib nvml.Interface) probe.Sampler {
	t.Helper()
	s, err := New(WithInterface(lib), WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func sampleOnce(t *testing.T, s probe.Sampler, withProc bool) []probe.Sample {
	t.Helper()
	out, err := s.Sample(nil, withProc)
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	return out
}

func TestInitFailureFallsBackWithReason(t *testing.T) {
	for _, tc := range []struct {
		ret         nvml.Return
		reason      string // "" means: a real error, not "unavailable"
		unavailable bool
	}{
		{nvml.ERROR_LIBRARY_NOT_FOUND, "library not found", true},
		{nvml.ERROR_DRIVER_NOT_LOADED, "no driver", true},
		{nvml.ERROR_NO_PERMISSION, "permission denied", true},
		{nvml.ERROR_LIB_RM_VERSION_MISMATCH, "versions differ", true},
		{nvml.ERROR_UNKNOWN, "nvml init", false},
	} {
		lib := newFakeLib(1)
		lib.initRet = tc.ret
		_, err := New(WithInterface(lib))
		if err == nil {
			t.Fatalf("%v: New succeeded", tc.ret)
		}
		reason, unavailable := probe.Unavailable(err)
		if unavailable != tc.unavailable {
			t.Errorf("%v: unavailable = %v, want %v (err %v)", tc.ret, unavailable, tc.unavailable, err)
		}
		if !strings.Contains(err.Error(), tc.reason) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %q, want one line with %q", tc.ret, err, tc.reason)
		}
		if unavailable && !strings.Contains(reason, tc.reason) {
			t.Errorf("%v: reason %q, want %q in it", tc.ret, reason, tc.reason)
		}
		s := probe.Open(func() (probe.Sampler, error) { return New(WithInterface(lib)) })
		if got := s.Status(); !strings.HasPrefix(got, probe.UnavailablePrefix) || !strings.Contains(got, tc.reason) {
			t.Errorf("%v: fallback status %q", tc.ret, got)
		}
		if len(lib.ShutdownCalls()) != 0 {
			t.Errorf("%v: Shutdown called after a failed Init", tc.ret)
		}
	}
}

// TestRealLibrary runs go-nvml for real. Without a driver (CI, this
// machine) it must fall back with a clear reason; with one it must work.
func TestRealLibrary(t *testing.T) {
	s, err := New()
	if err != nil {
		reason, ok := probe.Unavailable(err)
		if !ok || reason == "" {
			t.Fatalf("New without NVML: %v, want a *probe.UnavailableError", err)
		}
		fb := probe.Open(func() (probe.Sampler, error) { return New() })
		if r, isNull := probe.IsNull(fb); !isNull || r != reason {
			t.Fatalf("fallback = %q (null %v), want reason %q", fb.Status(), isNull, reason)
		}
		if _, err := Describe(); err == nil {
			t.Fatal("Describe without NVML succeeded")
		}
		t.Logf("no NVML here: %s", fb.Status())
		return
	}
	defer s.Close()
	devs, err := s.Devices()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Sample(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(devs) {
		t.Fatalf("%d samples for %d devices", len(out), len(devs))
	}
	for i, smp := range out {
		if smp.Device != devs[i].UUID || smp.Total <= 0 || smp.Processes == nil {
			t.Errorf("sample %d: %+v", i, smp)
		}
	}
	t.Logf("%s", s.Status())
}

func TestDGXA100Devices(t *testing.T) {
	srv, _ := newDGX()
	s := openFake(t, srv)
	devs, err := s.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 8 {
		t.Fatalf("%d devices, want 8", len(devs))
	}
	for i, d := range devs {
		want := srv.Devices[i].(interface{ GetUUID() (string, nvml.Return) })
		uuid, _ := want.GetUUID()
		if d.Index != i || d.UUID != uuid || d.Name != "Mock NVIDIA A100-SXM4-40GB" || d.Total != 42949672960 || d.MIG {
			t.Errorf("device %d: %+v", i, d)
		}
		if want := "0000:0" + string(rune('0'+i)) + ":00.0"; d.PCIBusID != want {
			t.Errorf("device %d: bus id %q, want %q", i, d.PCIBusID, want)
		}
	}
	if got, want := s.Status(), "NVML 12.550.54.15, driver 550.54.15, CUDA 12.4, 8 GPUs"; got != want {
		t.Errorf("Status = %q, want %q", got, want)
	}
}

func TestMemoryV2ThenV1Fallback(t *testing.T) {
	lib := newFakeLib(1)
	f := lib.devs[0]
	f.mem2 = &script[nvml.Memory_v2]{
		vals: []nvml.Memory_v2{{Total: 80 * gib, Reserved: 500 << 20, Used: 2 * gib, Free: 80*gib - 2*gib - 500<<20}, {Total: 80 * gib, Reserved: 500 << 20, Used: 3 * gib, Free: 1}},
		rets: []nvml.Return{nvml.SUCCESS, nvml.SUCCESS, nvml.SUCCESS, nvml.ERROR_NOT_SUPPORTED},
	}
	f.GetMemoryInfo_v2Func = f.mem2.next
	f.mem1 = ok(nvml.Memory{Total: 80 * gib, Used: 4 * gib, Free: 76 * gib})
	f.GetMemoryInfoFunc = f.mem1.next
	s := openFake(t, lib) // discovery takes the first v2 value

	if got := sampleOnce(t, s, false)[0]; got.Used != 3*gib || got.Reserved != 500<<20 || got.Free != 1 || got.Total != 80*gib {
		t.Errorf("v2 sample: %+v", got)
	}
	sampleOnce(t, s, false) // v2 still answers (3rd value repeats the 2nd)
	for i := 0; i < 3; i++ {
		got := sampleOnce(t, s, false)[0]
		if got.Used != 4*gib || got.Reserved != -1 || got.Free != 76*gib {
			t.Errorf("v1 round %d: %+v", i, got)
		}
	}
	if n := len(f.GetMemoryInfo_v2Calls()); n != 4 {
		t.Errorf("v2 called %d times, want 4 (not retried after NOT_SUPPORTED)", n)
	}
	if n := len(f.GetMemoryInfoCalls()); n != 3 {
		t.Errorf("v1 called %d times, want 3", n)
	}
}

func TestMemoryV2MissingSymbolUsesV1(t *testing.T) {
	lib := newFakeLib(1)
	lib.missing[symMemoryV2] = true
	s := openFake(t, lib)
	got := sampleOnce(t, s, false)[0]
	if got.Reserved != -1 || got.Used != gib+512<<20 {
		t.Errorf("sample: %+v", got)
	}
	if n := len(lib.devs[0].GetMemoryInfo_v2Calls()); n != 0 {
		t.Errorf("v2 called %d times although the library lacks it", n)
	}
}

func TestNotSupportedIsNoData(t *testing.T) {
	lib := newFakeLib(1)
	f := lib.devs[0]
	lib.missing[symMemoryV2] = true
	f.util = &script[nvml.Utilization]{rets: []nvml.Return{nvml.ERROR_NOT_SUPPORTED}}
	f.GetUtilizationRatesFunc = f.util.next
	f.detailRet, f.computeRet = nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED
	s := openFake(t, lib)
	// discovery read a total; from now on v1 memory is not supported either
	f.mem1 = &script[nvml.Memory]{rets: []nvml.Return{nvml.ERROR_NOT_SUPPORTED}}
	f.GetMemoryInfoFunc = f.mem1.next

	for i := 0; i < 2; i++ {
		got := sampleOnce(t, s, true)[0]
		if got.Util != -1 || got.Used != -1 || got.Free != -1 || got.Reserved != -1 || got.Total != 80*gib {
			t.Errorf("round %d: %+v", i, got)
		}
		if got.Processes == nil || len(got.Processes) != 0 {
			t.Errorf("round %d: processes %v, want empty and non-nil", i, got.Processes)
		}
	}
	if n := len(f.GetUtilizationRatesCalls()); n != 1 {
		t.Errorf("utilization called %d times, want 1", n)
	}
	if d, c := len(f.GetRunningProcessDetailListCalls()), len(f.GetComputeRunningProcessesCalls()); d != 1 || c != 1 {
		t.Errorf("process calls: detail %d, compute %d; want 1 and 1", d, c)
	}
}

func TestRealErrorsAreReportedAndOthersStillRead(t *testing.T) {
	lib := newFakeLib(2)
	s := openFake(t, lib)
	lib.devs[0].mem2 = &script[nvml.Memory_v2]{rets: []nvml.Return{nvml.ERROR_GPU_IS_LOST}}
	lib.devs[0].GetMemoryInfo_v2Func = lib.devs[0].mem2.next
	out, err := s.Sample(nil, false)
	if err == nil || !strings.Contains(err.Error(), "device 0") || !strings.Contains(err.Error(), "read memory") {
		t.Fatalf("err = %v, want device 0's memory failure", err)
	}
	if !errors.Is(err, nvml.ERROR_GPU_IS_LOST) {
		t.Errorf("err %v does not wrap ERROR_GPU_IS_LOST", err)
	}
	if len(out) != 2 || out[0].Used != -1 || out[1].Used != gib {
		t.Errorf("samples: %+v", out)
	}
	if n := len(lib.devs[0].GetMemoryInfoCalls()); n != 0 {
		t.Errorf("a real v2 error fell back to v1 (%d calls)", n)
	}
}

func TestCloseShutsDownOnce(t *testing.T) {
	lib := newFakeLib(1)
	s, err := New(WithInterface(lib))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times", n)
	}
	if _, err := s.Sample(nil, false); err == nil {
		t.Error("Sample after Close succeeded")
	}
}

func TestDescribeAndFormat(t *testing.T) {
	lib := newFakeLib(2)
	lib.devs[0].setProcesses(nvml.ProcessInfo{Pid: 4242, UsedGpuMemory: 1536 << 20})
	lib.devs[1].mig = nvml.DEVICE_MIG_ENABLE
	info, err := Describe(WithInterface(lib))
	if err != nil {
		t.Fatal(err)
	}
	if info.Driver != "550.54.15" || info.NVML != "12.550.54.15" || info.CUDA != "12.4" || len(info.Devices) != 2 {
		t.Fatalf("info: %+v", info)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Describe left NVML open (%d Shutdown calls)", n)
	}
	var b bytes.Buffer
	if err := probe.FormatDevices(&b, info); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"driver 550.54.15   NVML 12.550.54.15   CUDA 12.4",
		"GPU 0  NVIDIA H100 80GB HBM3  GPU-00000000-0000-0000-0000-000000000000  00000000:00:00.0",
		"used 1.0 GiB   reserved 512.0 MiB   free 78.5 GiB   total 80.0 GiB   util 87%",
		"processes  pid 4242     1.5 GiB",
		"MIG on",
		probe.NotVisibleNote,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDescribeUnavailable(t *testing.T) {
	lib := newFakeLib(1)
	lib.initRet = nvml.ERROR_LIBRARY_NOT_FOUND
	_, err := Describe(WithInterface(lib))
	if reason, ok := probe.Unavailable(err); !ok || !strings.HasPrefix(reason, "library not found") {
		t.Fatalf("err = %v", err)
	}
	if got := err.Error(); !strings.HasPrefix(got, "NVML unavailable: library not found") {
		t.Errorf("line %q", got)
	}
}
