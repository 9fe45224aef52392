package probe

import "strings"

// NotVisibleNote is the header line shown when the driver does not report
// per-process memory and device memory stands in for it.
const NotVisibleNote = "per-process memory not visible: using device memory"

// v1IdleUsed is how much "used" device memory the v1 API reports on an idle
// GPU (it counts the driver's own reservation as used). Above it, an empty
// process list means the processes are hidden, not absent.
const v1IdleUsed = 64 << 20

// NormalizeUUID returns uuid in the form used to compare devices: trimmed,
// lower case, without a "GPU-" prefix. PyTorch reports UUIDs without the
// prefix, NVML with it.
func NormalizeUUID(uuid string) string {
	u := strings.ToLower(strings.TrimSpace(uuid))
	return strings.TrimPrefix(u, "gpu-")
}

// MatchDevice finds the device whose UUID is uuid, with or without the
// "GPU-" prefix, in any case. It never matches by index: CUDA and NVML order
// devices differently and CUDA_VISIBLE_DEVICES renumbers them. An empty uuid
// matches nothing.
func MatchDevice(devs []Device, uuid string) (Device, bool) {
	want := NormalizeUUID(uuid)
	if want == "" {
		return Device{}, false
	}
	for _, d := range devs {
		if NormalizeUUID(d.UUID) == want {
			return d, true
		}
	}
	return Device{}, false
}

// ProcessUsed returns the memory that the driver reports for the hook's
// process in s. pid is the hook's os.getpid() and nspid its NSpid list
// (outermost namespace first, may be nil). The rule:
//
//  1. nspid[0], when nspid is given: the pid in the outermost PID namespace
//     the hook's /proc knows, which is the host pid when the hook runs in a
//     container and the monitor on the host.
//  2. pid, when it differs: the monitor shares the hook's own namespace
//     (both in one container, or no containers at all).
//
// Entries with the same pid are summed (MIG lists one per instance). ok is
// false when the process list was not read in this round (s.Processes is
// nil) or holds neither pid.
func ProcessUsed(s Sample, pid int, nspid []int) (used int64, ok bool) {
	if s.Processes == nil {
		return 0, false
	}
	if len(nspid) > 0 && nspid[0] > 0 {
		if used, ok := sumPID(s.Processes, nspid[0]); ok {
			return used, true
		}
		if pid == nspid[0] {
			return 0, false
		}
	}
	if pid <= 0 {
		return 0, false
	}
	return sumPID(s.Processes, pid)
}

func sumPID(ps []Process, pid int) (used int64, ok bool) {
	for _, p := range ps {
		if p.PID == pid && p.Used >= 0 {
			used += p.Used
			ok = true
		}
	}
	return used, ok
}

// ProcessesVisible reports whether the driver shows per-process memory on
// device d, judging from its sample s. It is false when MIG mode is on, and
// when the process list was read but is empty although the device has memory
// in use (a container without the host's PID namespace, or a driver that
// hides processes). With the v1 API (s.Reserved < 0) "used" includes the
// driver's own reservation, so the list must be empty with more than 64 MiB
// used. A sample whose list was not read (nil) says nothing: true.
// When it is false, show NotVisibleNote and use device memory.
func ProcessesVisible(d Device, s Sample) bool {
	if d.MIG {
		return false
	}
	if s.Processes == nil || len(s.Processes) > 0 {
		return true
	}
	idle := int64(0)
	if s.Reserved < 0 {
		idle = v1IdleUsed
	}
	return s.Used <= idle
}
