//go:build !cgo

package nvmlprobe

import (
	"errors"

	"github.com/vramscope/vramscope/probe"
)

// Option configures New and Describe. Without cgo there is nothing to
// configure.
type Option func()

var errNoCgo = &probe.UnavailableError{
	Reason: "this vramscope was built without cgo (CGO_ENABLED=0); rebuild with CGO_ENABLED=1",
	Err:    errors.New("go-nvml needs cgo"),
}

// New reports that NVML cannot be used: go-nvml needs cgo.
func New(...Option) (probe.Sampler, error) { return nil, errNoCgo }

// Describe reports that NVML cannot be used: go-nvml needs cgo.
func Describe(...Option) (probe.Info, error) { return probe.Info{}, errNoCgo }
