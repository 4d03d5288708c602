package redis

import (
	"errors"
	"strconv"
	"strings"
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
