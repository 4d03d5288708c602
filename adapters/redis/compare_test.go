package redis_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/resumable-go/resumable/adapters/redis"
)

// TestCompareAgreesWithParsing: Compare's fast paths for IDs as Redis
// writes them (of one shape, and of any) order every pair as parsing both
// IDs does, and so does any text (IDs with leading zeros, 20 digits, a
// bare number, not an ID, a byte beside the digits).
func TestCompareAgreesWithParsing(t *testing.T) {
	edge := []string{"", "0", "0-0", "0-1", "1-0", "1", "5", "5-0", "05-1", "5-01", "-", "-1", "1-", "x-1", "1-x", "1-2-3",
		"9-9", "10-0", "99-99", "100-1", "18446744073709551615-0", "18446744073709551616-0", "9999999999999999999-1",
		"10000000000000000000-0", "1764650000123-17", "1764650000123-18", "1764650000124-0", " 1-1", "1-1 ", "20-", "10-",
		"12-34", "1a-34", "12-3b", "21-34", "12-43", "01-34", "12-04", "00-00", "0-00", "00-0", "1/-34", "12-/4", "12-:4", "1:-34",
		"9999999999999999999-9999999999999999999", "9999999999999999999-9999999999999999998", "1000000000000000000-1000000000000000000"}
	rng := rand.New(rand.NewPCG(1, 2))
	ids := append([]string(nil), edge...)
	for range 300 {
		ids = append(ids, fmt.Sprintf("%d-%d", rng.Uint64N(1<<uint(rng.IntN(64))), rng.Uint64N(1<<uint(rng.IntN(64)))))
	}
	for i := range 100 { // neighbours: equal milliseconds
		ids = append(ids, fmt.Sprintf("1764650000%03d-%d", i%7, i))
	}
	ids = append(ids, spoiled("1764650000123-17", "12345678901234567-1234567890", "1234567-89", "12345678-9")...)
	for _, a := range ids {
		for _, b := range ids {
			if got, want := redis.Compare(a, b), redis.CompareParsed(a, b); got != want {
				t.Errorf("Compare(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

// spoiled returns each of ids, and each of them with one byte replaced,
// in every place, by a byte beside the digits (or a "-", or a byte whose
// low bits are a digit's): the checks that take eight bytes at a time
// must catch it wherever it falls.
func spoiled(ids ...string) []string {
	var out []string
	for _, id := range ids {
		out = append(out, id)
		for i := range len(id) {
			for _, c := range []byte{'/', ':', '-', '0', 'a', 0xB5, 0xFF, 0x39 + 6} {
				b := []byte(id)
				b[i] = c
				out = append(out, string(b))
			}
		}
	}
	return out
}

// FuzzCompare: Compare orders any two texts as parsing them does, and
// the other way round with the opposite sign.
func FuzzCompare(f *testing.F) {
	f.Add("1764650000123-17", "1764650000123-18")
	f.Add("12345678-9", "1234567:-9")
	f.Add("0-1", "00-1")
	f.Fuzz(func(t *testing.T, a, b string) {
		got := redis.Compare(a, b)
		if want := redis.CompareParsed(a, b); got != want {
			t.Fatalf("Compare(%q, %q) = %d, want %d", a, b, got, want)
		}
		if back := redis.Compare(b, a); back != -got {
			t.Fatalf("Compare(%q, %q) = %d, but Compare(%q, %q) = %d", a, b, got, b, a, back)
		}
	})
}

// BenchmarkCompare orders two IDs of one millisecond, as the stream does
// for every entry.
func BenchmarkCompare(b *testing.B) {
	b.ReportAllocs()
	x, y := "1764650000123-17", "1764650000123-18"
	for range b.N {
		if redis.Compare(x, y) >= 0 {
			b.Fatal("not before")
		}
	}
}
