package cursor_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/cursor"
)

func FuzzFileLoadInt64(f *testing.F) {
	for _, seed := range []string{"0\n", "42", " -7 \r\n", "", "\n", "abc", "1 2", "\x00\x00", "9223372036854775808", "+1", "1e3", "０"} {
		f.Add([]byte(seed))
	}
	fuzzLoad(f, cursor.Int64())
}

func FuzzFileLoadString(f *testing.F) {
	for _, seed := range []string{"abc\n", "  a b \r\n", "", " ", "a\nb", "\x00", "\xff", "é\u200b", "\u00a0x\u00a0", "a\u0085"} {
		f.Add([]byte(seed))
	}
	fuzzLoad(f, cursor.String())
}

func FuzzFileLoadJSON(f *testing.F) {
	for _, seed := range []string{
		`{"revision":5,"token":"a"}` + "\n", `{"revision":5`, `{}`, `null`, `[]`, `""`, `1`,
		`{"revision":1}{"revision":2}`, `{"revison":1}`, `{"token":"\ud800"}`, "\xef\xbb\xbf{}", "",
	} {
		f.Add([]byte(seed))
	}
	fuzzLoad(f, cursor.JSON[position]())
}

// fuzzLoad checks that a File store's Load, on a file with arbitrary
// contents, returns a cursor or an error matching ErrCorrupt, never
// panics, and that a loaded cursor saves and loads back unchanged.
func fuzzLoad[C any](f *testing.F, codec cursor.Codec[C]) {
	path := filepath.Join(f.TempDir(), "cursor")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var initial C
		store := mustNewFile(t, path, initial, codec)
		ctx := context.Background()
		c, err := store.Load(ctx)
		if err != nil {
			var fe *cursor.FileError
			if !errors.As(err, &fe) || fe.Op != "decode" || !errors.Is(err, cursor.ErrCorrupt) || !fe.Permanent() {
				t.Fatalf("Load() of %q = %v, want a permanent *FileError matching ErrCorrupt", data, err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("Load() = %q, want the path in the message", err)
			}
			return
		}
		if err := store.Save(ctx, c); err != nil {
			t.Fatalf("Save(%v) of the cursor loaded from %q = %v, want nil", c, data, err)
		}
		again, err := store.Load(ctx)
		if err != nil {
			t.Fatalf("Load() after Save(%v) = %v, want nil error", c, err)
		}
		if diff := cmp.Diff(c, again); diff != "" {
			t.Fatalf("Load() after Save of the cursor loaded from %q mismatch (-want +got):\n%s", data, diff)
		}
	})
}

// FuzzJSONEncodeDecoded checks that the JSON codec never refuses a value
// that came out of JSON: whatever encoding/json decodes into an any
// encodes, and reads back equal.
func FuzzJSONEncodeDecoded(f *testing.F) {
	for _, seed := range []string{
		`{"a":"x","n":1.5,"l":["y",true,null]}`, `"\ud800"`, "\"\xff\"", `1e308`, `-0`, `[]`, `{}`, `null`,
		`{"":{"":[[[]]]}}`, `"<&>"`, `0.1`, `123456789012345678901234567890`,
	} {
		f.Add([]byte(seed))
	}
	codec := cursor.JSON[any]()
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return
		}
		enc, err := codec.Encode(v)
		if err != nil {
			t.Fatalf("Encode(%#v), decoded from %q, = %v, want nil error", v, data, err)
		}
		got, err := codec.Decode(enc)
		if err != nil {
			t.Fatalf("Decode(%q) = %v, want nil error", enc, err)
		}
		if diff := cmp.Diff(v, got); diff != "" {
			t.Fatalf("Decode(Encode(%#v)) mismatch (-want +got):\n%s", v, diff)
		}
	})
}
