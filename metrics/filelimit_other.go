//go:build !unix

package metrics

// softFileLimit: no descriptor limit to read here (Windows); the metrics
// port keeps MaxHTTPConns.
func softFileLimit() (uint64, bool) {
	return 0, false
}
