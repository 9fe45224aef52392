//go:build !cgo

package buildinfo

// nvmlBuiltIn: without cgo, probe/nvmlprobe compiles only its stub.
const nvmlBuiltIn = false
