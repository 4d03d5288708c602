package redis

import (
	"errors"
	"hash/maphash"
	"math"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// Entry is one entry of a Redis stream, as a [Source] or a [Group]
// delivers it.
type Entry struct {
	// ID is the entry's ID as Redis writes it ("1733000000000-0").
	ID string `json:"id"`
	// Values are the entry's fields and values, as go-redis reads them
	// (each value a string).
	Values map[string]any `json:"values"`
	// Deliveries is the group's delivery count of the entry when it was
	// read: one plus the handler calls [Group.Handler] recorded on it (1
	// for an entry never handled; reading it again after a restart or a
	// claim adds nothing). Zero for a [Source].
	Deliveries int64 `json:"deliveries,omitempty"`
}

// ErrPoison is matched by the error [Group.Handler] returns for an entry
// whose handler calls reached the group's limit ([WithMaxDeliveries]): it is
// marked errclass.Permanent, so the stream parks the entry
// (stream.WithDeadLetter), which is then acknowledged, or ends Run.
var ErrPoison = errors.New("redis: delivery limit reached")

// ErrConsumerInUse is matched by the error a [Group]'s Open returns, marked
// errclass.Permanent, when another live connection of the server runs the
// same consumer of the same group (two processes given one name would
// handle each other's entries twice).
var ErrConsumerInUse = errors.New("redis: consumer name in use by another live connection")

// Extract is the [cursor.Extractor] of both modes: an entry's cursor is
// its ID. [NewResumer] and [NewGroupResumer] set it.
//
// [cursor.Extractor]: https://pkg.go.dev/github.com/resumable-go/resumable/cursor#Extractor
func Extract(e Entry) (string, error) { return e.ID, nil }

// Compare orders two stream entry IDs as Redis does (by milliseconds,
// then sequence), as cmp.Compare does: negative when a is before b. The
// empty string and "0" are before every ID; text that is not an ID sorts
// as 0-0. It is the cursor order of both modes ([NewResumer] sets it).
func Compare(a, b string) int {
	// IDs as Redis writes them compare without parsing: by length, then
	// digit by digit. It is the cursor order: the stream runs it on every
	// entry.
	if c, ok := compareShaped(a, b); ok {
		return c
	}
	if am, as, ok := canonical(a); ok {
		if bm, bs, ok := canonical(b); ok {
			if c := compareDigits(am, bm); c != 0 {
				return c
			}
			return compareDigits(as, bs)
		}
	}
	return compareParsed(a, b)
}

// compareShaped compares two IDs as Redis writes them that have the same
// shape (length, and the place of the "-"), as a stream's consecutive IDs
// mostly do: their digits checked eight at a time, then their bytes in
// order. ok is false for IDs of other shapes, and for what is not an ID as
// Redis writes it.
func compareShaped(a, b string) (c int, ok bool) {
	n := len(a)
	if n != len(b) || n < 3 || n > 39 {
		return 0, false
	}
	i := strings.IndexByte(a, '-')
	if i < 1 || i > 19 || n-i-1 < 1 || n-i-1 > 19 || b[i] != '-' {
		return 0, false
	}
	if i > 1 && (a[0] == '0' || b[0] == '0') || n-i-1 > 1 && (a[i+1] == '0' || b[i+1] == '0') {
		return 0, false // leading zeros
	}
	if !digitsBut(a, i) || !digitsBut(b, i) {
		return 0, false
	}
	return strings.Compare(a, b), true
}

// digitsBut reports whether every byte of s but s[dash] is a decimal
// digit, eight bytes at a time (len(s) >= 3).
func digitsBut(s string, dash int) bool {
	n := len(s)
	if n < 8 {
		for j := 0; j < n; j++ {
			if j != dash && s[j]-'0' > 9 { // below '0' wraps around
				return false
			}
		}
		return true
	}
	for j := 0; ; j += 8 {
		if j > n-8 {
			j = n - 8 // the last eight bytes, overlapping the ones before
		}
		if !digits8(load8(s, j), dash-j) {
			return false
		}
		if j == n-8 {
			return true
		}
	}
}

// digits8 reports whether the eight bytes of v (the first in the low byte)
// are decimal digits, the one at dash taken as a "-" when 0 <= dash < 8.
func digits8(v uint64, dash int) bool {
	const high, zeros = 0xF0F0F0F0F0F0F0F0, 0x3030303030303030
	if uint(dash) < 8 {
		v ^= uint64('-'^'0') << (8 * dash) // the "-" becomes a "0", anything else not a digit
	}
	// A digit is 0x30-0x39: its high nibble is 3, and so is that of the
	// digit plus 6 (no byte carries into the next when the first test
	// holds).
	return v&high == zeros && (v+0x0606060606060606)&high == zeros
}

// load8 returns s[j:j+8] as a little-endian number (one load: the
// compiler combines the bytes).
func load8(s string, j int) uint64 {
	s = s[j : j+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// compareParsed is Compare for any text.
func compareParsed(a, b string) int {
	am, as := parseID(a)
	bm, bs := parseID(b)
	switch {
	case am < bm:
		return -1
	case am > bm:
		return 1
	case as < bs:
		return -1
	case as > bs:
		return 1
	}
	return 0
}

// canonical splits id into its milliseconds and sequence when it is an ID
// as Redis writes it: two decimal numbers without leading zeros, each of
// at most 19 digits (below 2^64), joined by "-".
func canonical(id string) (ms, seq string, ok bool) {
	i := strings.IndexByte(id, '-')
	if i < 0 {
		return "", "", false
	}
	ms, seq = id[:i], id[i+1:]
	return ms, seq, decimal(ms) && decimal(seq)
}

// decimal reports whether s is a decimal number of 1 to 19 digits without
// leading zeros.
func decimal(s string) bool {
	if len(s) == 0 || len(s) > 19 || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// compareDigits orders two decimal numbers without leading zeros.
func compareDigits(a, b string) int {
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return strings.Compare(a, b)
}

// before returns the ID just before id, an ID as Redis writes it (1-0 is
// after 0-18446744073709551615); false for 0-0 and for anything else.
func before(id string) (string, bool) {
	m, q, ok := canonical(id)
	if !ok {
		return "", false
	}
	ms, err1 := strconv.ParseUint(m, 10, 64)
	seq, err2 := strconv.ParseUint(q, 10, 64)
	switch {
	case err1 != nil || err2 != nil:
		return "", false
	case seq > 0:
		return m + "-" + strconv.FormatUint(seq-1, 10), true
	case ms > 0:
		return strconv.FormatUint(ms-1, 10) + "-" + strconv.FormatUint(math.MaxUint64, 10), true
	}
	return "", false
}

// fingerprint hashes m's fields and values, whatever their order; false
// when a value is not a string (go-redis reads every one as a string).
func fingerprint(seed maphash.Seed, m goredis.XMessage) (uint64, bool) {
	sum := uint64(len(m.Values))
	var h maphash.Hash
	h.SetSeed(seed)
	for k, v := range m.Values {
		s, ok := v.(string)
		if !ok {
			return 0, false
		}
		h.Reset()
		h.WriteString(k)
		_ = h.WriteByte(0)
		h.WriteString(s)
		sum += h.Sum64()
	}
	return sum, true
}

// CompareIDs is [Compare].
//
// Deprecated: use Compare, the name every adapter gives its cursor order.
func CompareIDs(a, b string) int { return Compare(a, b) }

// parseID splits an ID into its milliseconds and sequence; what is not an
// ID is 0-0.
func parseID(id string) (ms, seq uint64) {
	m, s, found := strings.Cut(id, "-")
	ms, err := strconv.ParseUint(m, 10, 64)
	if err != nil {
		return 0, 0
	}
	if !found {
		return ms, 0
	}
	seq, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, 0
	}
	return ms, seq
}

// validID reports whether id is a complete entry ID (ms-seq).
func validID(id string) bool {
	m, s, found := strings.Cut(id, "-")
	if !found {
		return false
	}
	_, err1 := strconv.ParseUint(m, 10, 64)
	_, err2 := strconv.ParseUint(s, 10, 64)
	return err1 == nil && err2 == nil
}
