package record

import (
	"testing"
	"time"
)

// The writer's times are read without allocating, to the nanosecond;
// every other shape is left to strconv.
func TestDecimalTime(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"1763794800.260000", time.Unix(1763794800, 260000000), true},
		{"1763794800", time.Unix(1763794800, 0), true},
		{"12.", time.Unix(12, 0), true},
		{"0.123456789", time.Unix(0, 123456789), true},
		{"-0.5", time.Unix(0, -500000000), true},
		{"0.1234567891", time.Time{}, false},
		{"1e5", time.Time{}, false},
		{".5", time.Time{}, false},
		{"1234567890123456789", time.Time{}, false},
	} {
		got, ok := decimalTime([]byte(c.in))
		if ok != c.ok || ok && !got.Equal(c.want) {
			t.Errorf("decimalTime(%s) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
		if at, err := parseTimeAny([]byte(c.in)); c.ok && (err != nil || !at.Equal(c.want)) {
			t.Errorf("parseTimeAny(%s) = %v, %v", c.in, at, err)
		}
	}
}
