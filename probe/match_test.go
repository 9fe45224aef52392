package probe

import "testing"

func TestMatchDevice(t *testing.T) {
	devs := []Device{
		{Index: 0, UUID: "GPU-aaaaaaaa-0000-0000-0000-000000000000"},
		{Index: 1, UUID: "GPU-5e7f3a1c-0b2d-4c8e-9f10-2a3b4c5d6e7f"},
		{Index: 2, UUID: "GPU-cccccccc-0000-0000-0000-000000000000"},
	}
	for _, tc := range []struct {
		uuid  string
		index int // -1: no match
	}{
		{"GPU-5e7f3a1c-0b2d-4c8e-9f10-2a3b4c5d6e7f", 1},
		{"5e7f3a1c-0b2d-4c8e-9f10-2a3b4c5d6e7f", 1}, // as PyTorch reports it
		{"gpu-5E7F3A1C-0B2D-4C8E-9F10-2A3B4C5D6E7F", 1},
		{" GPU-cccccccc-0000-0000-0000-000000000000 ", 2},
		{"", -1},
		{"GPU-", -1},
		{"0", -1}, // an index is not a UUID
		{"MIG-5e7f3a1c-0b2d-4c8e-9f10-2a3b4c5d6e7f", -1},
		{"5e7f3a1c", -1},
	} {
		d, ok := MatchDevice(devs, tc.uuid)
		if (tc.index < 0) == ok || (ok && d.Index != tc.index) {
			t.Errorf("MatchDevice(%q) = %d, %v; want %d", tc.uuid, d.Index, ok, tc.index)
		}
	}
}

func TestProcessUsed(t *testing.T) {
	s := Sample{Processes: []Process{{PID: 98765, Used: 5 << 30}, {PID: 42, Used: 1 << 30}, {PID: 7, Used: 100}, {PID: 7, Used: 200}, {PID: 8, Used: -1}}}
	for _, tc := range []struct {
		name  string
		pid   int
		nspid []int
		used  int64
		ok    bool
	}{
		{"host pid, no container", 42, []int{42}, 1 << 30, true},
		{"no nspid", 42, nil, 1 << 30, true},
		{"container: outermost pid wins", 42, []int{98765, 42}, 5 << 30, true},
		{"container, host pid absent: own pid", 42, []int{11111, 42}, 1 << 30, true},
		{"absent", 5, []int{5}, 0, false},
		{"entries of one pid are summed", 7, nil, 300, true},
		{"size not available", 8, nil, 0, false},
		{"bad pid", 0, []int{0}, 0, false},
	} {
		used, ok := ProcessUsed(s, tc.pid, tc.nspid)
		if used != tc.used || ok != tc.ok {
			t.Errorf("%s: ProcessUsed = %d, %v; want %d, %v", tc.name, used, ok, tc.used, tc.ok)
		}
	}
	if _, ok := ProcessUsed(Sample{}, 42, nil); ok {
		t.Error("matched in a round that did not read processes")
	}
}

func TestProcessesVisible(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Device
		s    Sample
		want bool
	}{
		{"listed", Device{}, Sample{Used: 1 << 30, Reserved: 0, Processes: []Process{{PID: 1, Used: 1}}}, true},
		{"not read", Device{}, Sample{Used: 1 << 30, Reserved: 0}, true},
		{"idle v2", Device{}, Sample{Used: 0, Reserved: 500 << 20, Processes: []Process{}}, true},
		{"hidden v2", Device{}, Sample{Used: 1 << 20, Reserved: 500 << 20, Processes: []Process{}}, false},
		{"idle v1", Device{}, Sample{Used: 40 << 20, Reserved: -1, Processes: []Process{}}, true},
		{"hidden v1", Device{}, Sample{Used: 2 << 30, Reserved: -1, Processes: []Process{}}, false},
		{"MIG", Device{MIG: true}, Sample{Used: 2 << 30, Processes: []Process{{PID: 1, Used: 1}}}, false},
	} {
		if got := ProcessesVisible(tc.d, tc.s); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
