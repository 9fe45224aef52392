package probe

import (
	"fmt"
	"io"
	"strings"
)

// Info is what `vramscope devices` prints: the driver's versions and one
// reading of every device with its processes.
type Info struct {
	Driver  string // driver version, "" if unknown
	NVML    string // NVML library version, "" if unknown
	CUDA    string // CUDA version the driver supports ("12.4"), "" if unknown
	Devices []DeviceInfo
}

// DeviceInfo is one device and one reading of it. Sample.Processes is nil
// when the process list could not be read.
type DeviceInfo struct {
	Device Device
	Sample Sample
}

// FormatDevices writes info as text, one block per device, and returns the
// first write error.
func FormatDevices(w io.Writer, info Info) error {
	var b strings.Builder
	fmt.Fprintf(&b, "driver %s   NVML %s   CUDA %s\n", orUnknown(info.Driver), orUnknown(info.NVML), orUnknown(info.CUDA))
	if len(info.Devices) == 0 {
		b.WriteString("no GPUs found\n")
	}
	for _, di := range info.Devices {
		d, s := di.Device, di.Sample
		mig := ""
		if d.MIG {
			mig = "   MIG on"
		}
		fmt.Fprintf(&b, "\nGPU %d  %s  %s  %s%s\n", d.Index, d.Name, d.UUID, orUnknown(d.PCIBusID), mig)
		fmt.Fprintf(&b, "  memory     used %s   reserved %s   free %s   total %s   util %s\n",
			FormatBytes(s.Used), FormatBytes(s.Reserved), FormatBytes(s.Free), FormatBytes(s.Total), formatUtil(s.Util))
		switch {
		case s.Processes == nil:
			b.WriteString("  processes  not read\n")
		case !ProcessesVisible(d, s):
			b.WriteString("  processes  " + NotVisibleNote + "\n")
		case len(s.Processes) == 0:
			b.WriteString("  processes  none\n")
		default:
			for i, p := range s.Processes {
				label := "           "
				if i == 0 {
					label = "  processes"
				}
				fmt.Fprintf(&b, "%s  pid %-8d %s\n", label, p.PID, FormatBytes(p.Used))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// FormatBytes writes n bytes in binary units with one decimal ("1.5 GiB");
// negative values (unknown) read "n/a".
func FormatBytes(n int64) string {
	if n < 0 {
		return "n/a"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}

func formatUtil(u int) string {
	if u < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%d%%", u)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
