//go:build cgo

package buildinfo

// nvmlBuiltIn: with cgo, probe/nvmlprobe compiles its go-nvml adapter.
const nvmlBuiltIn = true
