package sse

import (
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// chunkReader returns one chunk per Read, then io.EOF.
type chunkReader struct{ chunks []string }

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	if r.chunks[0] = r.chunks[0][n:]; r.chunks[0] == "" {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}

// readAll returns everything next returns, heartbeats included, and the
// error that ended it.
func readAll(p *parser) ([]Event, error) {
	var evs []Event
	for {
		ev, err := p.next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// TestHeartbeats checks when comments are reported: once before the parser
// waits for more input, never when an event follows in what was read, and
// always with the last event ID as of the last blank line.
func TestHeartbeats(t *testing.T) {
	hb := func(id string) Event { return Event{ID: id, Heartbeat: true} }
	tests := []struct {
		name   string
		chunks []string
		want   []Event
	}{
		{
			name:   "one per read that holds comments",
			chunks: []string{": ping\n", ": ping\n: ping\n", "data: x\n\n"},
			want:   []Event{hb(""), hb(""), {Type: "message", Data: "x"}},
		},
		{
			name:   "none when an event follows in the same read",
			chunks: []string{": ping\ndata: x\n\n: ping\n", "data: y\n\n"},
			want:   []Event{{Type: "message", Data: "x"}, hb(""), {Type: "message", Data: "y"}},
		},
		{
			name:   "the ID of the last dispatched event, not of a block in progress",
			chunks: []string{"id: 1\ndata: a\n\n", "id: 2\n: ping\n", "data: b\n\n"},
			want:   []Event{{ID: "1", Type: "message", Data: "a"}, hb("1"), {ID: "2", Type: "message", Data: "b"}},
		},
		{
			name:   "an id-only block is reported at once",
			chunks: []string{"id: 1\n\nid: 2\n\n: ping\n"},
			want:   []Event{hb("1"), hb("2"), hb("2")},
		},
		{
			name:   "a comment cut by the end of input is not reported",
			chunks: []string{": pi"},
			want:   nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newParser(&chunkReader{chunks: tt.chunks}, "", defaultMaxEventSize, new(atomic.Int64))
			got, err := readAll(&p)
			if err != io.EOF {
				t.Errorf("next() = %v at the end, want io.EOF", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got)\n%s", diff)
			}
		})
	}
}

// TestMaxEventSize checks that a line, or the field lines of one event,
// longer than the limit end the parse, and that comments between events do
// not add up.
func TestMaxEventSize(t *testing.T) {
	const limit = 16
	tests := []struct {
		name    string
		input   string
		tooBig  bool
		wantLen int // events before the end
	}{
		{name: "a line of exactly the limit", input: "data: 0123456789\n\n", wantLen: 1},
		{name: "a line one byte longer", input: "data: 0123456789a\n\n", tooBig: true},
		{name: "a line without end, longer", input: "data: 0123456789abcdefghij", tooBig: true},
		{name: "two lines that add up to more", input: "data: 012345\ndata: 012345\n\n", tooBig: true},
		{name: "an unknown field counts", input: "x: 0123456789\ndata: 1\n\n", tooBig: true},
		{name: "events each within the limit", input: strings.Repeat("data: 0123456789\n\n", 50), wantLen: 50},
		{name: "comments do not add up", input: strings.Repeat(": 0123456789abc\n", 50) + "data: 1\n\n", wantLen: 1},
		{name: "a comment line longer than the limit", input: ": 0123456789abcdef\n", tooBig: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for how, r := range readers(tt.input) {
				p := newParser(r(), "", limit, new(atomic.Int64))
				evs, err := readAll(&p)
				evs = dropCommentHeartbeats(evs, "")
				if got := errors.Is(err, ErrEventTooLarge); got != tt.tooBig {
					t.Fatalf("read %s: next() = %v, want ErrEventTooLarge: %v", how, err, tt.tooBig)
				}
				if !tt.tooBig && len(evs) != tt.wantLen {
					t.Fatalf("read %s: %d events, want %d", how, len(evs), tt.wantLen)
				}
			}
		})
	}
}

// endless is a reader that never ends and never sends a line end.
type endless struct{ read int }

func (r *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	r.read += len(p)
	return len(p), nil
}

// TestMaxEventSizeBoundsMemory: a server that never ends a line makes the
// parser fail once it has buffered the limit, not grow without bound.
func TestMaxEventSizeBoundsMemory(t *testing.T) {
	const limit = 100 << 10
	r := &endless{}
	p := newParser(r, "", limit, new(atomic.Int64))
	if _, err := p.next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("next() = %v, want ErrEventTooLarge", err)
	}
	if len(p.buf) > limit+1 || r.read > limit+1 {
		t.Errorf("buffer %d bytes after reading %d, want both at most %d", len(p.buf), r.read, limit+1)
	}
}

// zeroReader returns 0, nil forever.
type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestReaderWithoutProgress(t *testing.T) {
	p := newParser(zeroReader{}, "", defaultMaxEventSize, new(atomic.Int64))
	if _, err := p.next(); !errors.Is(err, io.ErrNoProgress) {
		t.Errorf("next() = %v, want io.ErrNoProgress", err)
	}
}

func TestReadError(t *testing.T) {
	boom := errors.New("boom")
	p := newParser(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), &errReader{boom}), "", defaultMaxEventSize, new(atomic.Int64))
	evs, err := readAll(&p)
	if len(evs) != 1 || !errors.Is(err, boom) {
		t.Errorf("readAll() = %d events, %v; want 1, %v", len(evs), err, boom)
	}
}

type errReader struct{ err error }

func (r *errReader) Read([]byte) (int, error) { return 0, r.err }
