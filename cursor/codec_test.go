package cursor_test

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/cursor"
)

// position is a structured cursor for the JSON codec.
type position struct {
	Revision int64  `json:"revision"`
	Token    string `json:"token,omitempty"`
}

func TestInt64Codec(t *testing.T) {
	tests := []struct {
		name string
		c    int64
		want string
	}{
		{name: "zero", c: 0, want: "0\n"},
		{name: "positive", c: 42, want: "42\n"},
		{name: "negative", c: -7, want: "-7\n"},
		{name: "max", c: math.MaxInt64, want: "9223372036854775807\n"},
		{name: "min", c: math.MinInt64, want: "-9223372036854775808\n"},
	}
	codec := cursor.Int64()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := codec.Encode(tt.c)
			if err != nil || string(data) != tt.want {
				t.Fatalf("Encode(%d) = %q, %v, want %q, nil", tt.c, data, err, tt.want)
			}
			got, err := codec.Decode(data)
			if err != nil || got != tt.c {
				t.Errorf("Decode(%q) = %d, %v, want %d, nil", data, got, err, tt.c)
			}
		})
	}
}

func TestInt64CodecDecode(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    int64
		wantErr string // a substring of the error; "" for success
	}{
		{name: "no newline", data: "17", want: 17},
		{name: "surrounding space", data: " \t17 \r\n", want: 17},
		{name: "plus sign", data: "+5\n", want: 5},
		{name: "leading zeros", data: "007\n", want: 7},
		{name: "empty", data: "", wantErr: "empty"},
		{name: "blank", data: " \n\n", wantErr: "empty"},
		{name: "zero bytes", data: "\x00\x00\x00\x00", wantErr: "not a decimal integer"},
		{name: "word", data: "abc\n", wantErr: `"abc" is not a decimal integer`},
		{name: "trailing garbage", data: "12abc", wantErr: "not a decimal integer"},
		{name: "two numbers", data: "1 2\n", wantErr: "not a decimal integer"},
		{name: "two lines", data: "1\n2\n", wantErr: "not a decimal integer"},
		{name: "fraction", data: "1.5", wantErr: "not a decimal integer"},
		{name: "exponent", data: "1e3", wantErr: "not a decimal integer"},
		{name: "hex", data: "0x10", wantErr: "not a decimal integer"},
		{name: "underscore", data: "1_000", wantErr: "not a decimal integer"},
		{name: "overflow", data: "9223372036854775808", wantErr: "out of the int64 range"},
		{name: "underflow", data: "-9223372036854775809", wantErr: "out of the int64 range"},
		{name: "long garbage is cut", data: strings.Repeat("x", 1000), wantErr: "... (1000 bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cursor.Int64().Decode([]byte(tt.data))
			checkDecode(t, tt.data, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestStringCodec(t *testing.T) {
	tests := []struct {
		name string
		c    string
		want string
	}{
		{name: "digits", c: "12345", want: "12345\n"},
		{name: "inner space", c: "a b", want: "a b\n"},
		{name: "unicode", c: "événement-7", want: "événement-7\n"},
		{name: "opaque token", c: "8263a1b2c3==", want: "8263a1b2c3==\n"},
	}
	codec := cursor.String()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := codec.Encode(tt.c)
			if err != nil || string(data) != tt.want {
				t.Fatalf("Encode(%q) = %q, %v, want %q, nil", tt.c, data, err, tt.want)
			}
			got, err := codec.Decode(data)
			if err != nil || got != tt.c {
				t.Errorf("Decode(%q) = %q, %v, want %q, nil", data, got, err, tt.c)
			}
		})
	}
}

// TestStringCodecQuoted: every string that is not a plain line, the empty
// one first, is stored in the quoted form and reads back equal.
func TestStringCodecQuoted(t *testing.T) {
	tests := []struct {
		name string
		c    string
		want string
	}{
		{name: "empty", c: "", want: "quoted\n\"\"\n"},
		{name: "leading space", c: " a", want: "quoted\n\" a\"\n"},
		{name: "trailing tab", c: "42\t", want: "quoted\n\"42\\t\"\n"},
		{name: "inner tab", c: "a\tb", want: "quoted\n\"a\\tb\"\n"},
		{name: "trailing newline", c: "a\n", want: "quoted\n\"a\\n\"\n"},
		{name: "NUL", c: "a\x00", want: "quoted\n\"a\\x00\"\n"},
		{name: "C1 control", c: "a\u0085b", want: "quoted\n\"a\\u0085b\"\n"},
		{name: "no-break space at an end", c: "x\u00a0", want: "quoted\n\"x\\u00a0\"\n"},
		{name: "invalid UTF-8", c: "a\xff", want: "quoted\n\"a\\xff\"\n"},
		{name: "only white space", c: "  ", want: "quoted\n\"  \"\n"},
	}
	codec := cursor.String()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := codec.Encode(tt.c)
			if err != nil || string(data) != tt.want {
				t.Fatalf("Encode(%q) = %q, %v, want %q, nil", tt.c, data, err, tt.want)
			}
			got, err := codec.Decode(data)
			if err != nil || got != tt.c {
				t.Errorf("Decode(%q) = %q, %v, want %q, nil", data, got, err, tt.c)
			}
		})
	}
}

// TestStringCodecPlainLooksQuoted: one-line values that look like the
// quoted form stay plain, in files written before it existed and after.
func TestStringCodecPlainLooksQuoted(t *testing.T) {
	for _, c := range []string{`""`, `"abc"`, `"a\tb"`, "quoted", `quoted ""`} {
		data, err := cursor.String().Encode(c)
		if err != nil || string(data) != c+"\n" {
			t.Errorf("Encode(%q) = %q, %v, want %q, nil", c, data, err, c+"\n")
		}
		if got, err := cursor.String().Decode([]byte(c + "\n")); err != nil || got != c {
			t.Errorf("Decode(%q) = %q, %v, want %q, nil", c+"\n", got, err, c)
		}
	}
}

func FuzzStringCodec(f *testing.F) {
	for _, seed := range []string{"", "a", " a", "\t", "quoted", `""`, "\xff", "a\nb", "\u0085"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, c string) {
		data, err := cursor.String().Encode(c)
		if err != nil {
			t.Fatalf("Encode(%q) = %v, want nil", c, err)
		}
		if got, err := cursor.String().Decode(data); err != nil || got != c {
			t.Fatalf("Decode(Encode(%q)) = %q, %v, want %q, nil", c, got, err, c)
		}
	})
}

func TestStringCodecDecode(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    string
		wantErr string
	}{
		{name: "no newline", data: "abc", want: "abc"},
		{name: "surrounding space", data: "  abc \r\n", want: "abc"},
		{name: "empty", data: "", wantErr: "empty"},
		{name: "blank", data: "\n \t\n", wantErr: "empty"},
		{name: "zero bytes", data: "\x00\x00\x00", wantErr: "control character"},
		{name: "two lines", data: "abc\ndef\n", wantErr: "control character"},
		{name: "invalid UTF-8", data: "\xff\xfe", wantErr: "not valid UTF-8"},
		{name: "quoted empty", data: "quoted\n\"\"\n", want: ""},
		{name: "quoted with CRLF and spaces", data: " quoted \r\n \" a\" \r\n", want: " a"},
		{name: "quoted, no literal", data: "quoted\nabc\n", wantErr: "not a Go string literal"},
		{name: "quoted, raw literal", data: "quoted\n`abc`\n", wantErr: "not a Go string literal"},
		{name: "quoted, truncated literal", data: "quoted\n\"ab", wantErr: "not a Go string literal"},
		{name: "quoted, two literals", data: "quoted\n\"a\"\n\"b\"\n", wantErr: "not a Go string literal"},
		{name: "quoted, blank line between", data: "quoted\n\n\"a\"\n", want: "a"},
		{name: "the word alone is plain", data: "quoted\n", want: "quoted"},
		{name: "old file with quotes", data: "\"\"\n", want: `""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cursor.String().Decode([]byte(tt.data))
			checkDecode(t, tt.data, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestJSONCodec(t *testing.T) {
	codec := cursor.JSON[position]()
	c := position{Revision: 5, Token: "a"}
	data, err := codec.Encode(c)
	if want := `{"revision":5,"token":"a"}` + "\n"; err != nil || string(data) != want {
		t.Fatalf("Encode(%+v) = %q, %v, want %q, nil", c, data, err, want)
	}
	got, err := codec.Decode(data)
	if err != nil {
		t.Fatalf("Decode(%q) = %v, want nil error", data, err)
	}
	if diff := cmp.Diff(c, got); diff != "" {
		t.Errorf("Decode(%q) mismatch (-want +got):\n%s", data, diff)
	}
}

func TestJSONCodecDecode(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    position
		wantErr string
	}{
		{name: "compact", data: `{"revision":7}`, want: position{Revision: 7}},
		{name: "edited by hand", data: "{\n  \"revision\": 8,\n  \"token\": \"x\"\n}\n\n", want: position{Revision: 8, Token: "x"}},
		{name: "empty", data: "", wantErr: "empty"},
		{name: "blank", data: " \n", wantErr: "empty"},
		{name: "zero bytes", data: "\x00\x00", wantErr: "invalid character"},
		{name: "truncated", data: `{"revision":7`, wantErr: "truncated"},
		{name: "truncated string", data: `{"revision":7,"token":"ab`, wantErr: "truncated"},
		{name: "two values", data: `{"revision":7}{"revision":8}`, wantErr: "data after the JSON value"},
		{name: "trailing garbage", data: `{"revision":7} x`, wantErr: "data after the JSON value"},
		{name: "null", data: "null\n", wantErr: "null is not a cursor_test.position cursor"},
		{name: "unknown field", data: `{"revison":7}`, wantErr: `unknown field "revison"`},
		{name: "wrong type", data: `{"revision":"7"}`, wantErr: "cannot unmarshal string"},
		{name: "array", data: `[7]`, wantErr: "cannot unmarshal array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cursor.JSON[position]().Decode([]byte(tt.data))
			checkDecode(t, tt.data, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestJSONCodecNull(t *testing.T) {
	// null is a value of a pointer, map, slice or interface cursor.
	if got, err := cursor.JSON[*position]().Decode([]byte("null")); err != nil || got != nil {
		t.Errorf("JSON[*position]().Decode(null) = %v, %v, want nil, nil", got, err)
	}
	if got, err := cursor.JSON[map[string]int64]().Decode([]byte("null")); err != nil || got != nil {
		t.Errorf("JSON[map]().Decode(null) = %v, %v, want nil, nil", got, err)
	}
	if got, err := cursor.JSON[int64]().Decode([]byte("null")); err == nil {
		t.Errorf("JSON[int64]().Decode(null) = %v, nil, want an error", got)
	}
}

func TestJSONCodecEncodeError(t *testing.T) {
	_, err := cursor.JSON[float64]().Encode(math.Inf(1))
	if err == nil || !strings.HasPrefix(err.Error(), "cursor: JSON codec: ") {
		t.Errorf("Encode(+Inf) = %v, want a cursor: JSON codec error", err)
	}
}

// checkDecode checks the result of a Decode against want, or against an
// error containing wantErr when wantErr is not empty.
func checkDecode[C any](t *testing.T, data string, got C, err error, want C, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("Decode(%q) = %v, %v, want an error containing %q", data, got, err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("Decode(%q) = %v, want nil error", data, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Decode(%q) mismatch (-want +got):\n%s", data, diff)
	}
}
