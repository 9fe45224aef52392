package probe

import (
	"errors"
	"strings"
	"testing"
)

func TestNull(t *testing.T) {
	s := Null("library not found\nsecond line")
	if got, want := s.Status(), "NVML unavailable: library not found"; got != want {
		t.Errorf("Status = %q, want %q", got, want)
	}
	devs, err := s.Devices()
	if err != nil || len(devs) != 0 {
		t.Errorf("Devices = %v, %v", devs, err)
	}
	out, err := s.Sample(make([]Sample, 3), true)
	if err != nil || len(out) != 0 {
		t.Errorf("Sample = %v, %v", out, err)
	}
	if got := Null("").Status(); got != "NVML unavailable: unknown reason" {
		t.Errorf("empty reason: %q", got)
	}
}

type closeCounter struct {
	Sampler
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

func TestOpen(t *testing.T) {
	sim := NewSimulated()
	if got := Open(func() (Sampler, error) { return sim, nil }); got != Sampler(sim) {
		t.Errorf("Open replaced a working sampler: %v", got.Status())
	}
	leaked := &closeCounter{Sampler: sim}
	cause := errors.New("dlopen failed")
	for _, tc := range []struct {
		name string
		open func() (Sampler, error)
		want string
	}{
		{"unavailable", func() (Sampler, error) {
			return nil, &UnavailableError{Reason: "no driver", Err: cause}
		}, "NVML unavailable: no driver"},
		{"wrapped unavailable", func() (Sampler, error) {
			return nil, errors.Join(errors.New("open"), &UnavailableError{Reason: "permission denied"})
		}, "NVML unavailable: permission denied"},
		{"other error", func() (Sampler, error) { return nil, errors.New("count devices: Unknown Error") }, "NVML unavailable: count devices: Unknown Error"},
		{"panic", func() (Sampler, error) { panic("boom") }, "NVML unavailable: sampler panicked: boom"},
		{"nil sampler", func() (Sampler, error) { return nil, nil }, "NVML unavailable: sampler missing"},
		{"sampler and error", func() (Sampler, error) { return leaked, errors.New("half open") }, "NVML unavailable: half open"},
		{"nil opener", nil, "NVML unavailable: no sampler configured"},
	} {
		got := Open(tc.open)
		if got == nil || got.Status() != tc.want {
			t.Errorf("%s: status %q, want %q", tc.name, got.Status(), tc.want)
		}
		if _, ok := IsNull(got); !ok {
			t.Errorf("%s: not a null sampler", tc.name)
		}
	}
	if leaked.closed != 1 {
		t.Errorf("a sampler returned with an error was closed %d times, want 1", leaked.closed)
	}
}

func TestUnavailableError(t *testing.T) {
	cause := errors.New("ERROR_LIBRARY_NOT_FOUND")
	err := error(&UnavailableError{Reason: "library not found", Err: cause})
	if !errors.Is(err, cause) {
		t.Error("cause not unwrapped")
	}
	if reason, ok := Unavailable(err); !ok || reason != "library not found" {
		t.Errorf("Unavailable = %q, %v", reason, ok)
	}
	if _, ok := Unavailable(errors.New("x")); ok {
		t.Error("plain error read as unavailable")
	}
	if strings.Contains(err.Error(), "\n") || err.Error() != "NVML unavailable: library not found" {
		t.Errorf("Error() = %q", err.Error())
	}
}
