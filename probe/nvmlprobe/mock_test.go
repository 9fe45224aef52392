//go:build cgo

package nvmlprobe

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

const gib = 1 << 30

// script returns its values in turn and then repeats the last one.
type script[T any] struct {
	mu   sync.Mutex
	vals []T
	rets []nvml.Return
	i    int
}

func (s *script[T]) next() (T, nvml.Return) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.i
	if i >= len(s.rets) {
		i = len(s.rets) - 1
	}
	s.i++
	var v T
	if i < len(s.vals) {
		v = s.vals[i]
	}
	return v, s.rets[i]
}

func ok[T any](vals ...T) *script[T] {
	rets := make([]nvml.Return, len(vals))
	for i := range rets {
		rets[i] = nvml.SUCCESS
	}
	return &script[T]{vals: vals, rets: rets}
}

// fakeDevice sets every Func the adapter calls on d: memory from mem2 (v2)
// and mem1 (v1), utilization, and processes from procs through both the
// detail call and the compute-process call.
type fakeDevice struct {
	*mock.Device
	mem2   *script[nvml.Memory_v2]
	mem1   *script[nvml.Memory]
	util   *script[nvml.Utilization]
	procs  []nvml.ProcessInfo
	detail []nvml.ProcessDetail_v1
	// detailRet and computeRet are what the two process calls return.
	detailRet, computeRet nvml.Return
	mig                   int
}

func newFakeDevice(d *mock.Device, uuid string, total uint64) *fakeDevice {
	f := &fakeDevice{
		Device:     d,
		mem2:       ok(nvml.Memory_v2{Total: total, Reserved: 512 << 20, Used: gib, Free: total - gib - 512<<20}),
		mem1:       ok(nvml.Memory{Total: total, Used: gib + 512<<20, Free: total - gib - 512<<20}),
		util:       ok(nvml.Utilization{Gpu: 87}),
		detailRet:  nvml.SUCCESS,
		computeRet: nvml.SUCCESS,
	}
	if d.GetUUIDFunc == nil {
		d.GetUUIDFunc = func() (string, nvml.Return) { return uuid, nvml.SUCCESS }
		d.GetNameFunc = func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS }
	}
	d.GetMigModeFunc = func() (int, int, nvml.Return) { return f.mig, f.mig, nvml.SUCCESS }
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		for i, c := range "00000000:" + uuid[len(uuid)-2:] + ":00.0" {
			p.BusId[i] = int8(c)
		}
		return p, nvml.SUCCESS
	}
	d.GetMemoryInfo_v2Func = f.mem2.next
	d.GetMemoryInfoFunc = f.mem1.next
	d.GetUtilizationRatesFunc = f.util.next
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		if f.computeRet != nvml.SUCCESS {
			return nil, f.computeRet
		}
		return f.procs, nvml.SUCCESS
	}
	d.GetRunningProcessDetailListFunc = func() (nvml.ProcessDetailList, nvml.Return) {
		if f.detailRet != nvml.SUCCESS {
			return nvml.ProcessDetailList{}, f.detailRet
		}
		l := nvml.ProcessDetailList{NumProcArrayEntries: uint32(len(f.detail))}
		if len(f.detail) > 0 {
			l.ProcArray = &f.detail[0]
		}
		return l, nvml.SUCCESS
	}
	return f
}

// setProcesses gives both process calls the same list.
func (f *fakeDevice) setProcesses(ps ...nvml.ProcessInfo) {
	f.procs = ps
	f.detail = make([]nvml.ProcessDetail_v1, len(ps))
	for i, p := range ps {
		f.detail[i] = nvml.ProcessDetail_v1{Pid: p.Pid, UsedGpuMemory: p.UsedGpuMemory}
	}
}

// fakeLib is a mock.Interface over fake devices. missing lists symbols that
// LookupSymbol reports absent.
type fakeLib struct {
	*mock.Interface
	devs    []*fakeDevice
	missing map[string]bool
	initRet nvml.Return
}

func newFakeLib(n int) *fakeLib {
	l := &fakeLib{Interface: &mock.Interface{}, missing: map[string]bool{}, initRet: nvml.SUCCESS}
	for i := 0; i < n; i++ {
		l.devs = append(l.devs, newFakeDevice(&mock.Device{}, fmt.Sprintf("GPU-00000000-0000-0000-0000-0000000000%02x", i), 80*gib))
	}
	l.wire(func(i int) nvml.Device { return l.devs[i] }, len(l.devs))
	return l
}

func (l *fakeLib) wire(handle func(int) nvml.Device, n int) {
	m := l.Interface
	m.InitFunc = func() nvml.Return { return l.initRet }
	m.ShutdownFunc = func() nvml.Return { return nvml.SUCCESS }
	m.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS }
	m.SystemGetNVMLVersionFunc = func() (string, nvml.Return) { return "12.550.54.15", nvml.SUCCESS }
	m.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return 12040, nvml.SUCCESS }
	m.ExtensionsFunc = func() nvml.ExtendedInterface {
		return &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
			if l.missing[s] {
				return fmt.Errorf("symbol %s not found", s)
			}
			return nil
		}}
	}
	m.DeviceGetCountFunc = func() (int, nvml.Return) { return n, nvml.SUCCESS }
	m.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= n {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return handle(i), nvml.SUCCESS
	}
}

// newDGX returns go-nvml's DGX A100 mock (8 A100-40GB with random UUIDs)
// with the memory, utilization and process calls it lacks set on every
// device, and the fake devices that script them.
func newDGX() (*dgxa100.Server, []*fakeDevice) {
	srv := dgxa100.New()
	var fakes []*fakeDevice
	for _, d := range srv.Devices {
		dd := d.(*dgxa100.Device)
		f := newFakeDevice(&dd.Device, dd.UUID, dd.MemoryInfo.Total)
		bus := dd.PciBusID
		dd.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			for i, c := range bus {
				p.BusId[i] = int8(c)
			}
			return p, nvml.SUCCESS
		}
		fakes = append(fakes, f)
	}
	return srv, fakes
}
