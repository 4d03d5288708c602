package cursor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/cursor"
)

// partial is a cursor with a field JSON does not see.
type partial struct {
	Revision int64 `json:"revision"`
	shard    string
}

// skipped is a cursor with a field tagged out of JSON.
type skipped struct {
	Revision int64  `json:"revision"`
	Note     string `json:"-"`
}

// hidden is a cursor JSON can store nothing of.
type hidden struct {
	revision int64
}

// TestJSONRefusesLossyCursor checks that a cursor that would not read back
// equal from its JSON encoding is refused by Encode and by Save, which
// then keeps the previous cursor, instead of being saved changed.
func TestJSONRefusesLossyCursor(t *testing.T) {
	t.Run("invalid UTF-8 string", func(t *testing.T) {
		checkJSONRefused(t, "a", "a\xff", "string does not read back equal")
	})
	t.Run("invalid UTF-8 in a field", func(t *testing.T) {
		checkJSONRefused(t, position{Revision: 1}, position{Revision: 2, Token: "t\xfe"}, "position.Token does not read back equal")
	})
	t.Run("invalid UTF-8 in a map key", func(t *testing.T) {
		checkJSONRefused(t, map[string]int64{"a": 1}, map[string]int64{"a\xff": 2}, `map[string]int64["a\xff"] does not read back equal`)
	})
	t.Run("unexported field", func(t *testing.T) {
		checkJSONRefused(t, partial{Revision: 1}, partial{Revision: 2, shard: "eu-1"}, "partial.shard does not read back equal")
	})
	t.Run("field tagged -", func(t *testing.T) {
		checkJSONRefused(t, skipped{Revision: 1}, skipped{Revision: 2, Note: "n"}, "skipped.Note does not read back equal")
	})
	t.Run("int in an interface", func(t *testing.T) {
		// It would read back as a float64.
		checkJSONRefused[any](t, "a", int64(5), "interface {}.(int64) does not read back equal")
	})
	t.Run("NaN", func(t *testing.T) {
		checkJSONRefused(t, 1.5, math.NaN(), "unsupported value: NaN")
	})
}

// checkJSONRefused saves first to a File with the JSON codec, then checks
// that Encode and Save refuse bad with an error containing wantMsg, and
// that the file keeps first.
func checkJSONRefused[C any](t *testing.T, first, bad C, wantMsg string) {
	t.Helper()
	codec := cursor.JSON[C]()
	if data, err := codec.Encode(bad); err == nil || !strings.Contains(err.Error(), wantMsg) {
		t.Errorf("Encode(%#v) = %q, %v, want an error containing %q", bad, data, err, wantMsg)
	}
	path := filepath.Join(t.TempDir(), "cursor")
	f := mustNewFile(t, path, first, codec)
	mustSave(t, f, first)
	err := f.Save(context.Background(), bad)
	checkFileError(t, fmt.Sprintf("Save(%#v)", bad), err, fileErr{Op: "encode", Path: path, Permanent: true})
	if diff := cmp.Diff(first, mustLoad(t, f), cmp.Exporter(func(reflect.Type) bool { return true })); diff != "" {
		t.Errorf("Load() after a refused Save mismatch (-want +got):\n%s", diff)
	}
}

// TestJSONNoExportedFields checks that a struct cursor JSON can store
// nothing of is refused by NewFile, before any stream runs, and by Encode.
func TestJSONNoExportedFields(t *testing.T) {
	const wantMsg = "cursor_test.hidden has no exported fields"
	path := filepath.Join(t.TempDir(), "cursor")
	if f, err := cursor.NewFile(path, hidden{}, cursor.JSON[hidden]()); err == nil || !strings.Contains(err.Error(), wantMsg) {
		t.Errorf("NewFile() = %v, %v, want an error containing %q", f, err, wantMsg)
	}
	if _, err := cursor.NewFile(path, &hidden{}, cursor.JSON[*hidden]()); err == nil || !strings.Contains(err.Error(), wantMsg) {
		t.Errorf("NewFile() of a pointer = %v, want an error containing %q", err, wantMsg)
	}
	if data, err := cursor.JSON[hidden]().Encode(hidden{revision: 3}); err == nil || !strings.Contains(err.Error(), wantMsg) {
		t.Errorf("Encode(hidden{3}) = %q, %v, want an error containing %q", data, err, wantMsg)
	}
}

// stamped is a cursor with a time in it.
type stamped struct {
	Revision int64     `json:"revision"`
	At       time.Time `json:"at"`
}

// hostname reads back lower-cased, and its Equal method says that is the
// same host.
type hostname string

func (h *hostname) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	*h = hostname(strings.ToLower(s))
	return nil
}

func (h hostname) Equal(o hostname) bool { return strings.EqualFold(string(h), string(o)) }

// sparse has fields that JSON omits when empty and reads back nil.
type sparse struct {
	Parts  map[string]int64 `json:"parts,omitempty"`
	Shards []string         `json:"shards,omitempty"`
	Next   *position        `json:"next,omitempty"`
}

// TestJSONSavesEqualCursor checks that cursors that read back equal,
// though not identical in memory, are saved: no false refusals.
func TestJSONSavesEqualCursor(t *testing.T) {
	now := time.Now() // has a monotonic clock reading, which JSON drops
	t.Run("time with a monotonic reading", func(t *testing.T) {
		checkJSONSaved(t, now)
	})
	t.Run("time in a fixed zone", func(t *testing.T) {
		checkJSONSaved(t, time.Date(2025, 3, 1, 12, 0, 0, 5, time.FixedZone("CET", 3600)))
	})
	t.Run("time in a field", func(t *testing.T) {
		checkJSONSaved(t, stamped{Revision: 4, At: now})
	})
	t.Run("pointer to a time", func(t *testing.T) {
		checkJSONSaved(t, &now)
	})
	t.Run("Equal method", func(t *testing.T) {
		checkJSONSaved(t, struct{ Host hostname }{Host: "EU-1.example.com"})
	})
	t.Run("empty map and slice omitted", func(t *testing.T) {
		checkJSONSaved(t, sparse{Parts: map[string]int64{}, Shards: []string{}})
	})
	t.Run("pointers", func(t *testing.T) {
		checkJSONSaved(t, sparse{Next: &position{Revision: 3}, Parts: map[string]int64{"p": 1}})
	})
	t.Run("raw message", func(t *testing.T) {
		checkJSONSaved(t, json.RawMessage(`{"resume": "abc", "n": [1, 2]}`))
	})
	t.Run("IPv4 address in 4 bytes", func(t *testing.T) {
		checkJSONSaved(t, net.IPv4(10, 0, 0, 1).To4())
	})
	t.Run("floats", func(t *testing.T) {
		checkJSONSaved(t, []float64{0.1, math.Copysign(0, -1), 1e300, math.SmallestNonzeroFloat64})
	})
	t.Run("decoded JSON", func(t *testing.T) {
		checkJSONSaved[any](t, map[string]any{"a": "x", "n": 1.5, "l": []any{"y", true, nil}})
	})
}

// checkJSONSaved checks that c saves to a File with the JSON codec.
func checkJSONSaved[C any](t *testing.T, c C) {
	t.Helper()
	f := mustNewFile(t, filepath.Join(t.TempDir(), "cursor"), c, cursor.JSON[C]())
	mustSave(t, f, c)
	mustLoad(t, f)
}
