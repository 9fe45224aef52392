package session

// roomFor returns s with room for one more element, growing it by doubling
// but never past most: a bounded slice then holds at most most elements'
// worth of memory, not the quarter more that append's growth would give.
func roomFor[T any](s []T, most int) []T {
	if len(s) < cap(s) {
		return s
	}
	n := min(max(2*cap(s), 8), max(most, len(s)+1))
	grown := make([]T, len(s), n)
	copy(grown, s)
	return grown
}
