// Package digits parses the runs of ASCII digits that protocols use for
// numbers (an SSE retry: field, an HTTP Retry-After), without overflow.
package digits

// Parse reads b, one or more ASCII digits, as a base-ten number. Past limit
// it stops counting and returns a number above limit (limit must be below
// math.MaxInt64/10). It reports false for an empty b or one with a byte that
// is not a digit (a sign, a space).
func Parse[B []byte | string](b B, limit int64) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for i := range len(b) {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n <= limit {
			n = n*10 + int64(c-'0')
		}
	}
	return n, true
}
