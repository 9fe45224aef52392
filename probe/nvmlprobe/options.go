//go:build cgo

package nvmlprobe

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Option configures New and Describe.
type Option func(*options)

type options struct {
	lib     nvml.Interface
	libPath string
	now     func() time.Time
}

// WithInterface makes the sampler use lib instead of the system's NVML
// (nvml.New()); tests pass go-nvml's mock.Interface.
func WithInterface(lib nvml.Interface) Option {
	return func(o *options) { o.lib = lib }
}

// WithLibraryPath loads NVML from path instead of libnvidia-ml.so.1. It is
// ignored when WithInterface is given.
func WithLibraryPath(path string) Option {
	return func(o *options) { o.libPath = path }
}

// WithClock sets the clock that stamps samples (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}
