//go:build cgo

package nvmlprobe

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vramscope/vramscope/probe"
)

// Pids that no real process has: what garbled process-list entries carry
// when go-nvml's struct and the driver's disagree.
const (
	pidNone    = 0
	pidInvalid = math.MaxUint32
)

// notAvailable is NVML_VALUE_NOT_AVAILABLE as an unsigned 64-bit size: the
// driver cannot tell this process's memory (it stays listed, with Used -1).
const notAvailable = math.MaxUint64

// Sample reads every device once: memory (v2 API, v1 on drivers without
// it), utilization and, when withProcesses, the compute processes. A
// reading the device does not support is left at -1 (or the process list
// empty), not an error. It allocates nothing once dst has grown, except on
// errors and inside go-nvml's own process-list calls.
func (s *sampler) Sample(dst []probe.Sample, withProcesses bool) ([]probe.Sample, error) {
	dst = dst[:0]
	if s.closed {
		return dst, errClosed
	}
	at := s.now()
	var errs []error
	for i := range s.devs {
		d := &s.devs[i]
		smp := probe.Sample{At: at, Device: d.info.UUID, Used: -1, Reserved: -1, Free: -1, Total: d.info.Total, Util: -1}
		if err := s.readMemory(d, &smp); err != nil {
			errs = append(errs, fmt.Errorf("device %d (%s): read memory: %w", d.info.Index, d.info.UUID, err))
		}
		util, err := readUtil(d)
		if err != nil {
			errs = append(errs, fmt.Errorf("device %d (%s): read utilization: %w", d.info.Index, d.info.UUID, err))
		}
		smp.Util = util
		if withProcesses {
			ps, err := s.readProcesses(d)
			if err != nil {
				errs = append(errs, fmt.Errorf("device %d (%s): read processes: %w", d.info.Index, d.info.UUID, err))
			}
			smp.Processes = ps
		}
		dst = append(dst, smp)
	}
	if errs != nil {
		return dst, errors.Join(errs...)
	}
	return dst, nil
}

// readMemory fills Used, Reserved, Free and Total. The first time the v2
// call is not supported it switches the device to v1 for good.
func (s *sampler) readMemory(d *device, smp *probe.Sample) error {
	if !d.memV1 {
		m, ret := d.h.GetMemoryInfo_v2()
		switch {
		case ret == nvml.SUCCESS:
			smp.Used, smp.Reserved, smp.Free, smp.Total = int64(m.Used), int64(m.Reserved), int64(m.Free), int64(m.Total)
			return nil
		case noData(ret):
			d.memV1 = true
		default:
			return ret
		}
	}
	m, ret := d.h.GetMemoryInfo()
	switch {
	case ret == nvml.SUCCESS:
		smp.Used, smp.Reserved, smp.Free, smp.Total = int64(m.Used), -1, int64(m.Free), int64(m.Total)
	case noData(ret):
		smp.Used, smp.Reserved, smp.Free = -1, -1, -1
	default:
		return ret
	}
	return nil
}

// readUtil returns GPU utilization in percent, -1 where not supported.
func readUtil(d *device) (int, error) {
	if d.noUtil {
		return -1, nil
	}
	u, ret := d.h.GetUtilizationRates()
	switch {
	case ret == nvml.SUCCESS:
		return int(u.Gpu), nil
	case noData(ret):
		d.noUtil = true
		return -1, nil
	}
	return -1, ret
}

// readProcesses reads the compute processes into the device's buffer,
// preferring the process-detail call and falling back, for good, to the
// compute-process list where the driver lacks it. Where neither is
// supported the list is empty (not nil): per-process memory is not visible.
func (s *sampler) readProcesses(d *device) ([]probe.Process, error) {
	d.buf = d.buf[:0]
	total := d.info.Total
	if d.procs == procDetail {
		l, ret := d.h.GetRunningProcessDetailList()
		switch {
		case ret == nvml.SUCCESS:
			if l.ProcArray != nil && l.NumProcArrayEntries > 0 {
				for _, p := range unsafe.Slice(l.ProcArray, l.NumProcArrayEntries) {
					s.addProcess(d, p.Pid, p.UsedGpuMemory, total)
				}
			}
			return s.checkSum(d, total), nil
		case noData(ret):
			d.procs = procCompute
		default:
			return nil, ret
		}
	}
	if d.procs == procCompute {
		ps, ret := d.h.GetComputeRunningProcesses()
		switch {
		case ret == nvml.SUCCESS:
			for _, p := range ps {
				s.addProcess(d, p.Pid, p.UsedGpuMemory, total)
			}
			return s.checkSum(d, total), nil
		case noData(ret):
			d.procs = procNone
		default:
			return nil, ret
		}
	}
	return d.buf, nil
}

// addProcess appends one entry after the garbled-entry guard: a pid of 0 or
// 0xFFFFFFFF, or a size above the device's total memory, cannot be real and
// is dropped (and counted). Entries with the same pid (one per MIG instance)
// are summed.
func (s *sampler) addProcess(d *device, pid uint32, used uint64, total int64) {
	if pid == pidNone || pid == pidInvalid || (used != notAvailable && total > 0 && used > uint64(total)) {
		s.rejected++
		return
	}
	u := int64(-1)
	if used != notAvailable {
		u = int64(used)
	}
	for i := range d.buf {
		if d.buf[i].PID == int(pid) {
			if d.buf[i].Used >= 0 && u >= 0 {
				d.buf[i].Used += u
			}
			return
		}
	}
	d.buf = append(d.buf, probe.Process{PID: int(pid), Used: u})
}

// checkSum drops the whole list when its entries add up to more than the
// device has: then even the plausible-looking entries are garbled.
func (s *sampler) checkSum(d *device, total int64) []probe.Process {
	if total <= 0 {
		return d.buf
	}
	var sum int64
	for _, p := range d.buf {
		if p.Used > 0 {
			sum += p.Used
		}
	}
	if sum > total {
		s.rejected += int64(len(d.buf))
		d.buf = d.buf[:0]
	}
	return d.buf
}
