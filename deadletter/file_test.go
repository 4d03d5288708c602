package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/resumable-go/resumable/deadletter"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

type event = streamtest.Event[string]

// record is what the tests compare: a Record without its time.
type record = deadletter.Record[event, int64]

var ignoreTime = cmpopts.IgnoreFields(record{}, "Time")

func mustOpen(t *testing.T, path string) *deadletter.File[event, int64] {
	t.Helper()
	f, err := deadletter.Open(path, streamtest.Extract[string])
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func mustPark(t *testing.T, f *deadletter.File[event, int64], e event, err error) {
	t.Helper()
	if perr := f.Park(context.Background(), e, err); perr != nil {
		t.Fatalf("Park(%v) = %v, want nil", e, perr)
	}
}

func mustClose(t *testing.T, f *deadletter.File[event, int64]) {
	t.Helper()
	if err := f.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
}

// readAll returns the records of path and the errors Read yielded.
func readAll(t *testing.T, path string) (recs []record, errs []error) {
	t.Helper()
	for rec, err := range deadletter.Read[event, int64](path) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		recs = append(recs, rec)
	}
	return recs, errs
}

func mustReadAll(t *testing.T, path string) []record {
	t.Helper()
	recs, errs := readAll(t, path)
	if len(errs) > 0 {
		t.Fatalf("Read(%s) yielded errors: %v", path, errs)
	}
	return recs
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parked.jsonl")
	f := mustOpen(t, path)
	before := time.Now()
	mustPark(t, f, event{Seq: 3, Value: "no such customer"},
		&stream.HandlerError{Err: errors.New("customer 7: not found"), Tries: 1})
	mustPark(t, f, event{Seq: 9, Value: "db down"},
		fmt.Errorf("wrapped: %w", &stream.HandlerError{Err: errors.New("connection refused"), Tries: 5}))
	mustPark(t, f, event{Seq: 12, Value: "parked by hand\n\"quoted\" <html>"}, errors.New("plain error"))
	mustPark(t, f, event{Seq: 13, Value: "no error"}, nil)
	after := time.Now()
	mustClose(t, f)

	got := mustReadAll(t, path)
	want := []record{
		{Cursor: 3, Tries: 1, Err: "customer 7: not found", Event: event{Seq: 3, Value: "no such customer"}},
		{Cursor: 9, Tries: 5, Err: "connection refused", Event: event{Seq: 9, Value: "db down"}},
		{Cursor: 12, Tries: 1, Err: "plain error", Event: event{Seq: 12, Value: "parked by hand\n\"quoted\" <html>"}},
		{Cursor: 13, Tries: 1, Err: "", Event: event{Seq: 13, Value: "no error"}},
	}
	if diff := cmp.Diff(want, got, ignoreTime); diff != "" {
		t.Errorf("Read() (-want +got):\n%s", diff)
	}
	for i, r := range got {
		if r.Time.Location() != time.UTC || r.Time.Before(before.Truncate(time.Microsecond)) || r.Time.After(after) {
			t.Errorf("record %d: Time = %v, want UTC between %v and %v", i, r.Time, before.UTC(), after.UTC())
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines != len(want) || !strings.HasSuffix(string(data), "}\n") {
		t.Errorf("file holds %d lines, want %d whole ones:\n%s", lines, len(want), data)
	}
}

// The cursor comes from the extractor, not from the event's shape.
func TestCursorFromExtractor(t *testing.T) {
	type order struct{ ID string }
	path := filepath.Join(t.TempDir(), "parked.jsonl")
	f, err := deadletter.Open(path, func(o order) (string, error) { return "order/" + o.ID, nil })
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	if err := f.Park(context.Background(), order{ID: "A1"}, errors.New("bad")); err != nil {
		t.Fatalf("Park() = %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	for rec, err := range deadletter.Read[order, string](path) {
		if err != nil || rec.Cursor != "order/A1" || rec.Event.ID != "A1" {
			t.Errorf("Read() = %+v, %v; want cursor order/A1 and event A1", rec, err)
		}
	}
}

func TestReopenAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parked.jsonl")
	f := mustOpen(t, path)
	mustPark(t, f, event{Seq: 1, Value: "a"}, errors.New("first life"))
	mustClose(t, f)
	f = mustOpen(t, path)
	mustPark(t, f, event{Seq: 2, Value: "b"}, errors.New("second life"))
	mustClose(t, f)

	want := []record{
		{Cursor: 1, Tries: 1, Err: "first life", Event: event{Seq: 1, Value: "a"}},
		{Cursor: 2, Tries: 1, Err: "second life", Event: event{Seq: 2, Value: "b"}},
	}
	if diff := cmp.Diff(want, mustReadAll(t, path), ignoreTime); diff != "" {
		t.Errorf("Read() after two lives (-want +got):\n%s", diff)
	}
}

// A crash during a Park leaves a last line without its newline: the reader
// skips it, and the next Open cuts it before appending.
func TestTornLastLine(t *testing.T) {
	tests := []struct {
		name  string
		whole int    // records parked before the tear
		torn  string // what the crashed Park left
	}{
		{name: "half a record", whole: 2, torn: `{"time":"2026-12-01T00:00:00Z","cursor":9,"tri`},
		{name: "a record without its newline", whole: 2, torn: `{"time":"2026-12-01T00:00:00Z","cursor":9,"tries":1,"error":"x","event":{"Seq":9,"Value":"x"}}`},
		{name: "one byte", whole: 1, torn: `{`},
		{name: "the only line", whole: 0, torn: `{"time":"2026-12-01T00:00:00Z","cursor":9`},
		{name: "longer than a read chunk", whole: 1, torn: `{"time":"2026-12-01T00:00:00Z","event":"` + strings.Repeat("x", 10_000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "parked.jsonl")
			f := mustOpen(t, path)
			var want []record
			for i := range tt.whole {
				e := event{Seq: int64(i + 1), Value: "v"}
				mustPark(t, f, e, errors.New("poison"))
				want = append(want, record{Cursor: e.Seq, Tries: 1, Err: "poison", Event: e})
			}
			mustClose(t, f)
			whole, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			appendBytes(t, path, tt.torn)

			if diff := cmp.Diff(want, mustReadAll(t, path), ignoreTime); diff != "" {
				t.Errorf("Read() with a torn last line (-want +got):\n%s", diff)
			}

			f = mustOpen(t, path)
			cut, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(cut) != string(whole) {
				t.Errorf("after Open the file holds %q, want the whole lines only: %q", cut, whole)
			}
			e := event{Seq: 10, Value: "after the crash"}
			mustPark(t, f, e, errors.New("poison"))
			mustClose(t, f)
			want = append(want, record{Cursor: 10, Tries: 1, Err: "poison", Event: e})
			if diff := cmp.Diff(want, mustReadAll(t, path), ignoreTime); diff != "" {
				t.Errorf("Read() after reopening (-want +got):\n%s", diff)
			}
		})
	}
}

func appendBytes(t *testing.T, path, s string) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(fh, s); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
}

// A whole line that is not a record is reported with its line number, and
// reading goes on.
func TestReadBadLines(t *testing.T) {
	tests := []struct {
		name string
		line string
		want string // in the error
	}{
		{name: "garbage", line: "not json", want: "line 2: invalid character"},
		{name: "empty", line: "", want: "line 2: unexpected end of JSON input"},
		{name: "null", line: "null", want: "line 2: not a dead-letter record"},
		{name: "no time", line: `{"cursor":5,"tries":1}`, want: "line 2: not a dead-letter record"},
		{name: "event of another type", line: `{"time":"2026-12-01T00:00:00Z","cursor":5,"tries":1,"event":[1]}`, want: "line 2: json: cannot unmarshal array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "parked.jsonl")
			f := mustOpen(t, path)
			mustPark(t, f, event{Seq: 1, Value: "a"}, errors.New("x"))
			mustClose(t, f)
			appendBytes(t, path, tt.line+"\n")
			f = mustOpen(t, path)
			mustPark(t, f, event{Seq: 3, Value: "c"}, errors.New("x"))
			mustClose(t, f)

			recs, errs := readAll(t, path)
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.want) || !strings.Contains(errs[0].Error(), path) {
				t.Errorf("Read() errors = %v, want one naming %s and containing %q", errs, path, tt.want)
			}
			if len(recs) != 2 || recs[0].Cursor != 1 || recs[1].Cursor != 3 {
				t.Errorf("Read() records = %+v, want cursors 1 and 3", recs)
			}
		})
	}
}

func TestReadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.jsonl")
	recs, errs := readAll(t, path)
	if len(recs) != 0 || len(errs) != 1 || !errors.Is(errs[0], fs.ErrNotExist) {
		t.Errorf("Read(missing) = %v, %v; want one error matching fs.ErrNotExist", recs, errs)
	}
}

// Breaking out of the loop stops reading.
func TestReadBreak(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parked.jsonl")
	f := mustOpen(t, path)
	for i := range 5 {
		mustPark(t, f, event{Seq: int64(i + 1)}, errors.New("x"))
	}
	mustClose(t, f)
	n := 0
	for range deadletter.Read[event, int64](path) {
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 {
		t.Errorf("loop ran %d times, want 2", n)
	}
}

// Parks from many goroutines at once each write one whole line, even lines
// longer than what a single write is sure to keep whole on a pipe.
func TestConcurrentPark(t *testing.T) {
	const goroutines, each = 16, 40
	path := filepath.Join(t.TempDir(), "parked.jsonl")
	f := mustOpen(t, path)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				seq := int64(g*each + i + 1)
				value := strings.Repeat(string(rune('a'+g)), 1+(i*997)%9000)
				errs <- f.Park(context.Background(), event{Seq: seq, Value: value}, errors.New("poison"))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Park() = %v, want nil", err)
		}
	}
	mustClose(t, f)

	seen := make(map[int64]bool)
	for _, r := range mustReadAll(t, path) {
		g, i := int((r.Cursor-1)/each), int((r.Cursor-1)%each)
		if want := strings.Repeat(string(rune('a'+g)), 1+(i*997)%9000); r.Event.Value != want || r.Event.Seq != r.Cursor {
			t.Fatalf("record of cursor %d holds %d bytes of %q, want its own event", r.Cursor, len(r.Event.Value), r.Event.Value[:1])
		}
		if seen[r.Cursor] {
			t.Fatalf("cursor %d parked twice", r.Cursor)
		}
		seen[r.Cursor] = true
	}
	if len(seen) != goroutines*each {
		t.Errorf("read %d records, want %d", len(seen), goroutines*each)
	}
}

// holder is an event whose JSON encoding does not decode back: an
// interface field holding a value.
type holder struct {
	R io.Reader
}

func TestParkErrors(t *testing.T) {
	ctxDone, cancel := context.WithCancel(context.Background())
	cancel()
	errBroken := errors.New("no cursor in this event")
	tests := []struct {
		name string
		park func(path string) error
		is   error  // matched by the error, if not nil
		want string // in the error
	}{
		{
			name: "closed",
			park: func(path string) error {
				f, err := deadletter.Open(path, streamtest.Extract[string])
				if err != nil {
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
				return f.Park(context.Background(), event{Seq: 1}, errors.New("x"))
			},
			is:   fs.ErrClosed,
			want: "deadletter: park to ",
		},
		{
			name: "context done",
			park: func(path string) error {
				f, err := deadletter.Open(path, streamtest.Extract[string])
				if err != nil {
					return err
				}
				defer f.Close()
				return f.Park(ctxDone, event{Seq: 1}, errors.New("x"))
			},
			is:   context.Canceled,
			want: "deadletter: park to ",
		},
		{
			name: "extractor fails",
			park: func(path string) error {
				f, err := deadletter.Open(path, func(event) (int64, error) { return 0, errBroken })
				if err != nil {
					return err
				}
				defer f.Close()
				return f.Park(context.Background(), event{Seq: 1}, errors.New("x"))
			},
			is:   errBroken,
			want: "extracting the cursor",
		},
		{
			name: "unencodable event",
			park: func(path string) error {
				f, err := deadletter.Open(path, func(any) (int64, error) { return 1, nil })
				if err != nil {
					return err
				}
				defer f.Close()
				return f.Park(context.Background(), make(chan int), errors.New("x"))
			},
			want: "encoding the event: json: unsupported type: chan int",
		},
		{
			name: "event that does not decode back",
			park: func(path string) error {
				f, err := deadletter.Open(path, func(holder) (int64, error) { return 1, nil })
				if err != nil {
					return err
				}
				defer f.Close()
				return f.Park(context.Background(), holder{R: strings.NewReader("x")}, errors.New("x"))
			},
			want: "encoding the event: its JSON encoding does not decode back",
		},
		{
			name: "unencodable cursor",
			park: func(path string) error {
				f, err := deadletter.Open(path, func(event) (any, error) { return func() {}, nil })
				if err != nil {
					return err
				}
				defer f.Close()
				return f.Park(context.Background(), event{Seq: 1}, errors.New("x"))
			},
			want: "encoding the cursor: json: unsupported type: func()",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "parked.jsonl")
			err := tt.park(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Errorf("Park() = %v, want an error containing %q and matching %v", err, tt.want, tt.is)
			}
			if data, rerr := os.ReadFile(path); rerr != nil || len(data) != 0 {
				t.Errorf("after a failed Park the file holds %q (%v), want nothing", data, rerr)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		open func() error
		is   error
		want string
	}{
		{
			name: "empty path",
			open: func() error { _, err := deadletter.Open("", streamtest.Extract[string]); return err },
			want: "deadletter: Open: empty path",
		},
		{
			name: "nil extractor",
			open: func() error {
				_, err := deadletter.Open[event, int64](filepath.Join(dir, "x"), nil)
				return err
			},
			want: "nil extractor",
		},
		{
			name: "event type without JSON",
			open: func() error {
				_, err := deadletter.Open(filepath.Join(dir, "x"), func(chan int) (int64, error) { return 0, nil })
				return err
			},
			want: "the event type chan int: json: unsupported type",
		},
		{
			name: "cursor type without JSON",
			open: func() error {
				_, err := deadletter.Open(filepath.Join(dir, "x"), func(event) (func(), error) { return nil, nil })
				return err
			},
			want: "the cursor type func(): json: unsupported type",
		},
		{
			name: "missing directory",
			open: func() error {
				_, err := deadletter.Open(filepath.Join(dir, "no", "x"), streamtest.Extract[string])
				return err
			},
			is:   fs.ErrNotExist,
			want: "deadletter: Open: open ",
		},
		{
			name: "a directory",
			open: func() error { _, err := deadletter.Open(dir, streamtest.Extract[string]); return err },
			want: "deadletter: Open",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.open()
			if err == nil || !strings.Contains(err.Error(), tt.want) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Errorf("Open() = %v, want an error containing %q and matching %v", err, tt.want, tt.is)
			}
		})
	}
}

func TestCloseTwice(t *testing.T) {
	f := mustOpen(t, filepath.Join(t.TempDir(), "parked.jsonl"))
	mustClose(t, f)
	if err := f.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
}

// An event type that JSON would park without some of its data is refused
// at Open, naming the field; types that marshal themselves, embedded
// structs' exported fields and fields tagged "-" are fine.
func TestOpenRefusesLossyEvents(t *testing.T) {
	type hidden struct{ secret int }
	type nested struct {
		ID    int
		Inner struct{ note string }
	}
	type inner struct{ Name string }
	type embeds struct {
		inner
		At   time.Time
		skip int `json:"-"`
	}
	_ = []any{hidden{secret: 1}, nested{Inner: struct{ note string }{note: "n"}}, embeds{skip: 1}} // the fields exist to be refused
	dir := t.TempDir()
	tests := []struct {
		name  string
		open  func(path string) error
		field string // "" when Open must succeed
	}{
		{name: "only unexported", field: "hidden.secret", open: func(p string) error {
			_, err := deadletter.Open(p, func(hidden) (int, error) { return 0, nil })
			return err
		}},
		{name: "nested unexported", field: ".note", open: func(p string) error {
			_, err := deadletter.Open(p, func(nested) (int, error) { return 0, nil })
			return err
		}},
		{name: "embedded, time, skipped", open: func(p string) error {
			f, err := deadletter.Open(p, func(embeds) (int, error) { return 0, nil })
			if err == nil {
				err = f.Close()
			}
			return err
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.open(filepath.Join(dir, fmt.Sprintf("%d.jsonl", i)))
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Open() = %v, want nil", err)
			case tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field)):
				t.Fatalf("Open() = %v, want an error naming %s", err, tc.field)
			}
		})
	}
}
