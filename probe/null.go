package probe

import "strings"

// UnavailablePrefix starts the Status line of a null sampler and the line
// that `vramscope devices` prints when NVML cannot be used.
const UnavailablePrefix = "NVML unavailable: "

var _ Sampler = (*nullSampler)(nil)

// nullSampler stands in for NVML where it cannot be used: it has no devices
// and every round is empty.
type nullSampler struct {
	reason string
}

// Null returns a Sampler with no devices whose Status is
// "NVML unavailable: <reason>". An empty reason reads "unknown reason".
func Null(reason string) Sampler {
	reason = oneLine(reason)
	if reason == "" {
		reason = "unknown reason"
	}
	return &nullSampler{reason: reason}
}

// Devices returns no devices.
func (n *nullSampler) Devices() ([]Device, error) { return nil, nil }

// Sample returns dst[:0].
func (n *nullSampler) Sample(dst []Sample, _ bool) ([]Sample, error) { return dst[:0], nil }

// Status says why NVML is not used.
func (n *nullSampler) Status() string { return UnavailablePrefix + n.reason }

// Close does nothing.
func (n *nullSampler) Close() error { return nil }

// IsNull reports whether s is a null sampler, and if so, why NVML is not used.
func IsNull(s Sampler) (reason string, ok bool) {
	n, ok := s.(*nullSampler)
	if !ok {
		return "", false
	}
	return n.reason, true
}

// oneLine keeps the first line of s, trimmed.
func oneLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}
