package session

import (
	"fmt"
	"strconv"
)

// Bytes is a byte count that may be unknown. Unknown is not zero: a CPU run
// has no allocator figures, a machine without NVML has no driver figures.
type Bytes int64

// Unknown is the Bytes value for "no source for this figure".
const Unknown Bytes = -1

// MiB is 2^20 bytes.
const MiB = 1 << 20

// Known reports whether b holds a value.
func (b Bytes) Known() bool { return b >= 0 }

// Max returns the larger of two values, treating Unknown as absent.
func (b Bytes) Max(o Bytes) Bytes {
	if !b.Known() || o > b {
		return o
	}
	return b
}

// Sub returns b − o, Unknown when either side is.
func (b Bytes) Sub(o Bytes) Bytes {
	if !b.Known() || !o.Known() {
		return Unknown
	}
	return b - o
}

// MarshalJSON writes null for Unknown, an integer otherwise.
func (b Bytes) MarshalJSON() ([]byte, error) {
	if !b.Known() {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, int64(b), 10), nil
}

// UnmarshalJSON reads null as Unknown.
func (b *Bytes) UnmarshalJSON(p []byte) error {
	if string(p) == "null" {
		*b = Unknown
		return nil
	}
	v, err := strconv.ParseInt(string(p), 10, 64)
	if err != nil {
		return fmt.Errorf("bytes: %w", err)
	}
	*b = Bytes(v)
	return nil
}

// MiBString formats b in MiB, "–" when unknown.
func (b Bytes) MiBString() string {
	if !b.Known() {
		return "–"
	}
	return strconv.FormatInt((int64(b)+MiB/2)/MiB, 10)
}

// Human formats b with a binary unit ("3.4 GiB", "512 MiB"), "–" when unknown.
func (b Bytes) Human() string {
	switch {
	case !b.Known():
		return "–"
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= MiB:
		return fmt.Sprintf("%.0f MiB", float64(b)/MiB)
	case b >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	default:
		return fmt.Sprintf("%d B", int64(b))
	}
}

// Int64 is b as a count, -1 when unknown.
func (b Bytes) Int64() int64 {
	if !b.Known() {
		return -1
	}
	return int64(b)
}
