//go:build cgo

package nvmlprobe

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vramscope/vramscope/probe"
)

// initError turns a failed nvml.Init into an error. The expected ways for a
// machine to have no usable NVML become a *probe.UnavailableError with a
// short reason; anything else is a real failure.
func initError(ret nvml.Return) error {
	reason := ""
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		reason = "library not found (libnvidia-ml.so.1; is the NVIDIA driver installed?)"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		reason = "no driver (the NVIDIA kernel module is not loaded)"
	case nvml.ERROR_NO_PERMISSION:
		reason = "permission denied (cannot open /dev/nvidia*)"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		reason = "driver and library versions differ (reload the NVIDIA module or reboot)"
	case nvml.ERROR_FUNCTION_NOT_FOUND:
		reason = "library too old (nvmlInit not found)"
	default:
		return fmt.Errorf("nvml init: %w", ret)
	}
	return &probe.UnavailableError{Reason: reason, Err: ret}
}

// noData reports whether ret means "this device or driver does not have
// this", which is no data rather than a failure.
func noData(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND
}

// asError returns nil for SUCCESS and ret otherwise (an nvml.Return is an
// error even when it is SUCCESS).
func asError(ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return ret
}
