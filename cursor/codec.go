package cursor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Codec turns a cursor into the bytes a [File] store writes, and back. A
// Codec must be safe for concurrent use. Decode must reject what is not a
// whole cursor (empty, truncated or garbled data): [File] reports it as
// [ErrCorrupt], where a lenient Decode would restart the stream silently.
type Codec[C any] interface {
	// Encode returns the encoding of c.
	Encode(c C) ([]byte, error)
	// Decode returns the cursor encoded in data, or an error when data is
	// not one whole cursor.
	Decode(data []byte) (C, error)
}

// JSON returns a [Codec] that stores a cursor as one JSON value followed by
// a newline. Decode is strict (exactly one value, no unknown fields, null
// only for a pointer, interface, map or slice C), and Encode refuses a
// cursor that would not read back equal (invalid UTF-8, a field JSON does
// not see); a type with an Equal method, such as [time.Time], is compared
// with it. [NewFile] refuses the codec for a struct C with no exported
// field. docs/cursor-files.md in the repository has the full rules.
func JSON[C any]() Codec[C] {
	return jsonCodec[C]{typeErr: jsonTypeError(reflect.TypeFor[C]())}
}

type jsonCodec[C any] struct {
	typeErr error // non-nil when JSON can store nothing of C
}

func (j jsonCodec[C]) Encode(c C) ([]byte, error) {
	if j.typeErr != nil {
		return nil, j.typeErr
	}
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("cursor: JSON codec: %w", err)
	}
	got, err := decodeJSON[C](data)
	if err != nil {
		return nil, fmt.Errorf("cursor: JSON codec: %v: its encoding does not decode: %w", reflect.TypeFor[C](), err)
	}
	if where, same := sameJSON(jsonValue(&c), jsonValue(&got), 0); !same {
		return nil, fmt.Errorf("cursor: JSON codec: %v%s does not read back equal from its JSON encoding", reflect.TypeFor[C](), where)
	}
	return append(data, '\n'), nil
}

// checkType returns the error Encode returns for every cursor when JSON
// can store nothing of C; NewFile calls it.
func (j jsonCodec[C]) checkType() error { return j.typeErr }

func (jsonCodec[C]) Decode(data []byte) (C, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		var zero C
		return zero, errEmpty
	}
	c, err := decodeJSON[C](trimmed)
	if err != nil {
		var zero C
		return zero, fmt.Errorf("cursor: JSON codec: %w", err)
	}
	return c, nil
}

// decodeJSON decodes data, which holds no surrounding white space, as
// [JSON]'s Decode documents.
func decodeJSON[C any](data []byte) (C, error) {
	var c C
	if bytes.Equal(data, []byte("null")) && !nilable(reflect.TypeFor[C]()) {
		return c, fmt.Errorf("null is not a %v cursor", reflect.TypeFor[C]())
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var zero C
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return zero, fmt.Errorf("truncated JSON: %w", err)
		}
		return zero, err
	}
	if off := dec.InputOffset(); off != int64(len(data)) {
		var zero C
		return zero, fmt.Errorf("data after the JSON value at offset %d: %s", off, excerpt(data[off:]))
	}
	return c, nil
}

// nilable reports whether JSON null is a meaningful value of t.
func nilable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		return true
	}
	return false
}

// String returns a [Codec] that stores any string cursor, the empty string
// included, as text for an operator to read and edit: a plain string on one
// line, any other (empty, with control characters or white space at an end,
// not UTF-8) as the word quoted and a Go string literal on the next line.
// Decode rejects anything else, an empty file included.
func String() Codec[string] {
	return stringCodec{}
}

type stringCodec struct{}

// quotedWord is the first line of the quoted form of a string cursor.
const quotedWord = "quoted"

func (stringCodec) Encode(s string) ([]byte, error) {
	if checkText(s) != nil || s != strings.TrimSpace(s) {
		data := make([]byte, 0, len(quotedWord)+len(s)+4)
		data = append(data, quotedWord+"\n"...)
		return append(strconv.AppendQuote(data, s), '\n'), nil
	}
	data := make([]byte, 0, len(s)+1)
	return append(append(data, s...), '\n'), nil
}

func (stringCodec) Decode(data []byte) (string, error) {
	trimmed := bytes.TrimSpace(data)
	if first, rest, ok := bytes.Cut(trimmed, []byte("\n")); ok && string(bytes.TrimSpace(first)) == quotedWord {
		lit := bytes.TrimSpace(rest)
		s, err := strconv.Unquote(string(lit))
		if err != nil || lit[0] != '"' {
			return "", fmt.Errorf("cursor: string codec: the line after %q is not a Go string literal: %s", quotedWord, excerpt(lit))
		}
		return s, nil
	}
	s := string(trimmed)
	if err := checkText(s); err != nil {
		return "", err
	}
	return s, nil
}

// checkText reports whether s is a plain text cursor: non-empty, UTF-8,
// without control characters.
func checkText(s string) error {
	if s == "" {
		return errEmpty
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("cursor: string codec: %s is not valid UTF-8", excerpt([]byte(s)))
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("cursor: string codec: control character %U at offset %d in %s", r, i, excerpt([]byte(s)))
		}
	}
	return nil
}

// Int64 returns a [Codec] that stores an int64 cursor (an offset, a
// revision, a sequence number) as decimal text followed by a newline, for
// an operator to read and edit. Decode ignores white space around the
// number and rejects anything else, including an empty file, a number with
// a fraction or exponent, and one that overflows int64.
func Int64() Codec[int64] {
	return int64Codec{}
}

type int64Codec struct{}

func (int64Codec) Encode(n int64) ([]byte, error) {
	data := make([]byte, 0, 21)
	return append(strconv.AppendInt(data, n, 10), '\n'), nil
}

func (int64Codec) Decode(data []byte) (int64, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return 0, errEmpty
	}
	n, err := strconv.ParseInt(string(trimmed), 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("cursor: int64 codec: %s is out of the int64 range", excerpt(trimmed))
		}
		return 0, fmt.Errorf("cursor: int64 codec: %s is not a decimal integer", excerpt(trimmed))
	}
	return n, nil
}

// errEmpty is the error every built-in codec returns for data that holds
// nothing but white space.
var errEmpty = errors.New("cursor: empty cursor data")

// excerpt quotes the start of data for an error message, so that a large
// corrupt file does not make a large error.
func excerpt(data []byte) string {
	const limit = 40
	if len(data) <= limit {
		return strconv.Quote(string(data))
	}
	return strconv.Quote(string(data[:limit])) + fmt.Sprintf("... (%d bytes)", len(data))
}
