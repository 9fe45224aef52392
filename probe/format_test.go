package probe

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		-1: "n/a", 0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536 << 20: "1.5 GiB", 80 << 30: "80.0 GiB", 3 << 40: "3.0 TiB",
	} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFormatDevices(t *testing.T) {
	info := Info{Driver: "550.54.15", CUDA: "12.4", Devices: []DeviceInfo{
		{Device: Device{Index: 0, UUID: "GPU-a", Name: "A100"}, Sample: Sample{Used: -1, Reserved: -1, Free: -1, Total: 80 << 30, Util: -1}},
		{Device: Device{Index: 1, UUID: "GPU-b", Name: "A100", PCIBusID: "00000000:07:00.0"}, Sample: Sample{Used: 0, Reserved: 0, Free: 80 << 30, Total: 80 << 30, Util: 0, Processes: []Process{}}},
		{Device: Device{Index: 2, UUID: "GPU-c", Name: "A100"}, Sample: Sample{Used: 3 << 30, Reserved: 0, Total: 80 << 30, Processes: []Process{{PID: 1, Used: 1 << 30}, {PID: 22, Used: 2 << 30}}}},
	}}
	var b bytes.Buffer
	if err := FormatDevices(&b, info); err != nil {
		t.Fatal(err)
	}
	want := `driver 550.54.15   NVML unknown   CUDA 12.4

GPU 0  A100  GPU-a  unknown
  memory     used n/a   reserved n/a   free n/a   total 80.0 GiB   util n/a
  processes  not read

GPU 1  A100  GPU-b  00000000:07:00.0
  memory     used 0 B   reserved 0 B   free 80.0 GiB   total 80.0 GiB   util 0%
  processes  none

GPU 2  A100  GPU-c  unknown
  memory     used 3.0 GiB   reserved 0 B   free 0 B   total 80.0 GiB   util 0%
  processes  pid 1        1.0 GiB
             pid 22       2.0 GiB
`
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	b.Reset()
	_ = FormatDevices(&b, Info{})
	if !strings.Contains(b.String(), "no GPUs found") {
		t.Errorf("empty info: %q", b.String())
	}
	if err := FormatDevices(failWriter{}, info); err == nil {
		t.Error("write error lost")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
