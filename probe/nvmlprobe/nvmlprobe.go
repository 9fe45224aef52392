//go:build cgo

// Package nvmlprobe is vramscope's NVML adapter: it implements probe.Sampler
// with go-nvml and is the only package in the program that imports it. Read
// through the narrow nvml.Interface, it runs against the system's NVML or,
// in tests, against go-nvml's mocks.
package nvmlprobe

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vramscope/vramscope/probe"
)

// Symbols that old drivers lack. go-nvml calls C functions directly, so
// calling one the library does not export would abort the program: their
// presence is checked once, at New.
const (
	symMemoryV2      = "nvmlDeviceGetMemoryInfo_v2"
	symProcessDetail = "nvmlDeviceGetRunningProcessDetailList"
)

var errClosed = errors.New("nvml sampler closed")

var _ probe.Sampler = (*sampler)(nil)

// procAPI is how a device's process list is read.
type procAPI int

const (
	procDetail  procAPI = iota // GetRunningProcessDetailList (newer drivers)
	procCompute                // GetComputeRunningProcesses
	procNone                   // neither is supported: no per-process data
)

// device is one GPU and what has been learnt about what it supports, so
// that an unsupported call is not retried every round.
type device struct {
	h      nvml.Device
	info   probe.Device
	memV1  bool // GetMemoryInfo_v2 is not supported: use v1
	noUtil bool // GetUtilizationRates is not supported
	procs  procAPI
	buf    []probe.Process // reused for Sample.Processes
}

// sampler is the NVML-backed probe.Sampler.
type sampler struct {
	lib      nvml.Interface
	now      func() time.Time
	driver   string
	version  string
	cuda     string
	devs     []device
	rejected int64 // garbled process entries dropped so far
	closed   bool
}

// New initializes NVML and lists the devices. When NVML cannot be used on
// this machine (no library, no driver, no permission) the error is a
// *probe.UnavailableError with a one-line reason, and the caller falls back
// with probe.Open; any other error is a real failure.
func New(opts ...Option) (probe.Sampler, error) {
	s, err := open(opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func open(opts ...Option) (*sampler, error) {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	lib := o.lib
	if lib == nil {
		if o.libPath != "" {
			lib = nvml.New(nvml.WithLibraryPath(o.libPath))
		} else {
			lib = nvml.New()
		}
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, initError(ret)
	}
	s := &sampler{lib: lib, now: o.now}
	if err := s.discover(); err != nil {
		_ = lib.Shutdown()
		return nil, err
	}
	return s, nil
}

// discover reads the versions and the device list.
func (s *sampler) discover() error {
	if v, ret := s.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		s.driver = v
	}
	if v, ret := s.lib.SystemGetNVMLVersion(); ret == nvml.SUCCESS {
		s.version = v
	}
	if v, ret := s.lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS && v > 0 {
		s.cuda = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	ext := s.lib.Extensions()
	memV1 := ext.LookupSymbol(symMemoryV2) != nil
	procs := procDetail
	if ext.LookupSymbol(symProcessDetail) != nil {
		procs = procCompute
	}

	n, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("count devices: %w", ret)
	}
	s.devs = make([]device, 0, n)
	for i := 0; i < n; i++ {
		h, ret := s.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return fmt.Errorf("device %d: get handle: %w", i, ret)
		}
		d := device{h: h, memV1: memV1, procs: procs, buf: make([]probe.Process, 0, 8)}
		d.info.Index = i
		uuid, ret := h.GetUUID()
		if ret != nvml.SUCCESS {
			return fmt.Errorf("device %d: get UUID: %w", i, ret)
		}
		d.info.UUID = uuid
		if name, ret := h.GetName(); ret == nvml.SUCCESS {
			d.info.Name = name
		}
		if pci, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
			d.info.PCIBusID = busID(pci)
		}
		if cur, _, ret := h.GetMigMode(); ret == nvml.SUCCESS {
			d.info.MIG = cur == nvml.DEVICE_MIG_ENABLE
		}
		var smp probe.Sample
		if err := s.readMemory(&d, &smp); err != nil {
			return fmt.Errorf("device %d (%s): read memory: %w", i, uuid, err)
		}
		d.info.Total = smp.Total
		s.devs = append(s.devs, d)
	}
	return nil
}

// busID returns the PCI bus id ("00000000:07:00.0"), from the legacy field
// where the long one is empty.
func busID(p nvml.PciInfo) string {
	if id := cString(p.BusId[:]); id != "" {
		return id
	}
	return cString(p.BusIdLegacy[:])
}

func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// Devices lists the GPUs in NVML order.
func (s *sampler) Devices() ([]probe.Device, error) {
	out := make([]probe.Device, len(s.devs))
	for i := range s.devs {
		out[i] = s.devs[i].info
	}
	return out, nil
}

// Status says which NVML and driver are in use, and how many garbled
// process entries were dropped if any.
func (s *sampler) Status() string {
	var b strings.Builder
	fmt.Fprintf(&b, "NVML %s, driver %s, CUDA %s, %d GPU", orUnknown(s.version), orUnknown(s.driver), orUnknown(s.cuda), len(s.devs))
	if len(s.devs) != 1 {
		b.WriteString("s")
	}
	if s.rejected > 0 {
		fmt.Fprintf(&b, ", %d garbled process entries dropped", s.rejected)
	}
	return b.String()
}

// Close shuts NVML down. Later Sample calls fail; a second Close does
// nothing.
func (s *sampler) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml shutdown: %w", ret)
	}
	return nil
}

func orUnknown(v string) string {
	if v == "" {
		return "unknown"
	}
	return v
}

// Describe opens NVML, reads every device once with its processes, and
// closes it again: what `vramscope devices` prints (see probe.FormatDevices).
// Without NVML the error is a *probe.UnavailableError (probe.Unavailable
// gives its reason). When a reading fails, info holds what was read and err
// says what failed.
func Describe(opts ...Option) (probe.Info, error) {
	s, err := open(opts...)
	if err != nil {
		return probe.Info{}, err
	}
	smps, sampleErr := s.Sample(nil, true)
	info := probe.Info{Driver: s.driver, NVML: s.version, CUDA: s.cuda}
	for i := range s.devs {
		di := probe.DeviceInfo{Device: s.devs[i].info}
		if i < len(smps) {
			di.Sample = smps[i].Clone()
		}
		info.Devices = append(info.Devices, di)
	}
	return info, errors.Join(sampleErr, s.Close())
}
