package deadletter

import (
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/fsync"
	"github.com/resumable-go/resumable/stream"
)

// File is a dead-letter sink that appends one JSON line per parked event and
// syncs it before [File.Park] returns; pass Park to [stream.WithDeadLetter].
// A File is safe for concurrent use. After a failed write or sync every later
// Park fails, since what reached the disk is unknown: fix the cause and
// [Open] the file again.
type File[T, C any] struct {
	path    string
	extract cursor.Extractor[T, C]

	mu  sync.Mutex // serialises Park and Close
	f   *os.File   // nil once closed
	err error      // the first failed write or sync; every later Park fails
}

// line is a [Record] as written: event and cursor encoded, fields in order.
type line struct {
	Time   time.Time       `json:"time"`
	Cursor json.RawMessage `json:"cursor"`
	Tries  int             `json:"tries"`
	Err    string          `json:"error"`
	Event  json.RawMessage `json:"event"`
}

// Open opens the dead-letter file at path for appending, creating it (mode
// 0644, not its directories) if needed, and returns a [File] whose Park
// records each event's cursor as extract returns it. It cuts a last line torn
// by a crash during a Park (whose event was not committed). Open fails on an
// empty path, a nil extract, a T or C that does not round-trip through JSON
// (a chan, a func), a T with an unexported field that JSON would drop (the
// error names it; a type that marshals itself is trusted), or a file it
// cannot read and append. Close the File when
// done.
func Open[T, C any](path string, extract cursor.Extractor[T, C]) (*File[T, C], error) {
	if path == "" {
		return nil, errors.New("deadletter: Open: empty path")
	}
	if extract == nil {
		return nil, fmt.Errorf("deadletter: Open %s: nil extractor", path)
	}
	var event T
	if _, err := encode(event); err != nil {
		return nil, fmt.Errorf("deadletter: Open %s: the event type %T: %w", path, event, err)
	}
	if field := lossy(reflect.TypeFor[T](), nil); field != "" {
		return nil, fmt.Errorf("deadletter: Open %s: the event type %v: %s is unexported: JSON would park the event without it", path, reflect.TypeFor[T](), field)
	}
	var c C
	if _, err := encode(c); err != nil {
		return nil, fmt.Errorf("deadletter: Open %s: the cursor type %T: %w", path, c, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("deadletter: Open %s: %w", path, err)
	}
	_, statErr := os.Stat(abs)
	fh, err := os.OpenFile(abs, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("deadletter: Open: %w", err)
	}
	if err := prepare(fh, errors.Is(statErr, fs.ErrNotExist)); err != nil {
		_ = fh.Close() // the error that matters is prepare's
		return nil, fmt.Errorf("deadletter: Open %s: %w", abs, err)
	}
	return &File[T, C]{path: abs, extract: extract, f: fh}, nil
}

// prepare makes a new file's name durable, or cuts the torn last line of
// an existing one.
func prepare(fh *os.File, created bool) error {
	fi, err := fh.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if created {
		return fsync.Dir(filepath.Dir(fh.Name()))
	}
	end, err := lastNewline(fh, fi.Size())
	if err != nil || end == fi.Size() {
		return err
	}
	if err := fh.Truncate(end); err != nil {
		return fmt.Errorf("cutting the torn last line at byte %d: %w", end, err)
	}
	return fh.Sync()
}

// lastNewline returns the offset just after the last '\n' among the first
// size bytes of fh, or 0 when there is none.
func lastNewline(fh *os.File, size int64) (int64, error) {
	buf := make([]byte, 4096)
	for end := size; end > 0; {
		start := max(0, end-int64(len(buf)))
		chunk := buf[:end-start]
		if _, err := fh.ReadAt(chunk, start); err != nil && err != io.EOF {
			return 0, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] == '\n' {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return 0, nil
}

// lossy returns the first unexported struct field (as a path) that JSON
// would silently drop from a value of type t, or "". A type that marshals
// itself (json.Marshaler, encoding.TextMarshaler) is trusted; an interface
// is judged by its value, at Park.
func lossy(t reflect.Type, seen map[reflect.Type]bool) string {
	if t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) ||
		t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) || seen[t] {
		return ""
	}
	if seen == nil {
		seen = map[reflect.Type]bool{}
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return lossy(t.Elem(), seen)
	case reflect.Map:
		return lossy(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Tag.Get("json") == "-" {
				continue
			}
			if !f.IsExported() && !(f.Anonymous && f.Type.Kind() == reflect.Struct) {
				return t.Name() + "." + f.Name
			}
			if sub := lossy(f.Type, seen); sub != "" {
				return sub
			}
		}
	}
	return ""
}

var (
	marshaler     = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// encode returns v's JSON encoding, checked to decode back into a V.
func encode[V any](v V) (json.RawMessage, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var back V
	if err := json.Unmarshal(data, &back); err != nil {
		return nil, fmt.Errorf("its JSON encoding does not decode back: %w", err)
	}
	return data, nil
}

// Park appends a record of event and err (see [Record]) to the file and
// syncs it before it returns nil; the stream may then commit the event.
// It writes nothing and returns an error when ctx is done (matching ctx's
// error), the File is closed (matching [fs.ErrClosed]), the extractor fails,
// the event or cursor does not round-trip through JSON, or an earlier write
// failed. Once writing it finishes: file system calls cannot be interrupted.
func (f *File[T, C]) Park(ctx context.Context, event T, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("deadletter: park to %s: %w", f.path, cerr)
	}
	c, xerr := f.extract(event)
	if xerr != nil && !errors.Is(xerr, cursor.ProgressOnly) {
		return fmt.Errorf("deadletter: park to %s: extracting the cursor: %w", f.path, xerr)
	}
	rec := line{Tries: 1}
	if he := (*stream.HandlerError)(nil); errors.As(err, &he) {
		rec.Tries, err = max(1, he.Tries), he.Err
	}
	if err != nil {
		rec.Err = err.Error()
	}
	var eerr error
	if rec.Event, eerr = encode(event); eerr != nil {
		return fmt.Errorf("deadletter: park to %s: encoding the event: %w", f.path, eerr)
	}
	if rec.Cursor, eerr = encode(c); eerr != nil {
		return fmt.Errorf("deadletter: park to %s: encoding the cursor: %w", f.path, eerr)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.f == nil:
		return fmt.Errorf("deadletter: park to %s: %w", f.path, fs.ErrClosed)
	case f.err != nil:
		return fmt.Errorf("deadletter: park to %s: an earlier write failed: %w", f.path, f.err)
	}
	rec.Time = time.Now().UTC() // under the lock: times grow down the file
	data, eerr := json.Marshal(rec)
	if eerr != nil { // cannot happen: every part was encoded above
		return fmt.Errorf("deadletter: park to %s: encoding the record: %w", f.path, eerr)
	}
	data = append(data, '\n')
	if _, werr := f.f.Write(data); werr != nil {
		f.err = werr
		return fmt.Errorf("deadletter: park to %s: %w", f.path, werr)
	}
	if serr := f.f.Sync(); serr != nil {
		f.err = serr
		return fmt.Errorf("deadletter: park to %s: %w", f.path, serr)
	}
	return nil
}

// Close closes the file, after any Park in progress. Parks after Close
// fail. Close may be called more than once; later calls return nil.
func (f *File[T, C]) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.f == nil {
		return nil
	}
	err := f.f.Close()
	f.f = nil
	if err != nil {
		return fmt.Errorf("deadletter: close: %w", err)
	}
	return nil
}
