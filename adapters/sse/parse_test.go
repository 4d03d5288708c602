package sse

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// noRetry is the reconnection time a test starts with, to tell "never set"
// from any value a retry: field can set.
const noRetry = time.Duration(-1)

// parseResult is everything a parse of a whole input produces.
type parseResult struct {
	Events []Event
	End    string // "eof" (between events), "cut" (inside one) or the error
	Retry  time.Duration
}

// parseAll reads r to its end with a parser whose last event ID starts as
// lastID, and drops the heartbeats reported for comments (see
// dropCommentHeartbeats).
func parseAll(r io.Reader, lastID string, maxSize int) parseResult {
	var retry atomic.Int64
	retry.Store(int64(noRetry))
	p := newParser(r, lastID, maxSize, &retry)
	var res parseResult
	for {
		ev, err := p.next()
		if err != nil {
			switch {
			case err == io.EOF:
				res.End = "eof"
			case errors.Is(err, io.ErrUnexpectedEOF):
				res.End = "cut"
			default:
				res.End = err.Error()
			}
			break
		}
		res.Events = append(res.Events, ev)
	}
	res.Events = dropCommentHeartbeats(res.Events, lastID)
	res.Retry = time.Duration(retry.Load())
	return res
}

// dropCommentHeartbeats removes the heartbeats that report comments, whose
// number depends on how the input was split into reads. A heartbeat for a
// comment carries the ID of the item before it; one for a block that moved
// the last event ID never does.
func dropCommentHeartbeats(evs []Event, lastID string) []Event {
	kept := evs[:0]
	for _, ev := range evs {
		if ev.Heartbeat && ev.ID == lastID {
			continue
		}
		kept = append(kept, ev)
		lastID = ev.ID
	}
	if len(kept) == 0 {
		return nil
	}
	return kept
}

// readers returns the ways a test feeds input to the parser: at once, a
// byte at a time, halves, and split in two at every offset (a CR at the end
// of one read and its LF at the start of the next among them).
func readers(input string) map[string]func() io.Reader {
	rs := map[string]func() io.Reader{
		"whole":    func() io.Reader { return strings.NewReader(input) },
		"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(input)) },
		"half":     func() io.Reader { return iotest.HalfReader(strings.NewReader(input)) },
		"data+EOF": func() io.Reader { return iotest.DataErrReader(strings.NewReader(input)) },
	}
	for i := 1; i < len(input); i++ {
		rs["split at "+strconv.Itoa(i)] = func() io.Reader {
			return io.MultiReader(strings.NewReader(input[:i]), strings.NewReader(input[i:]))
		}
	}
	return rs
}

// TestParse checks the parser against the WHATWG HTML standard, §9.2.6
// "Interpreting an event stream" (cited per row), for every way of
// splitting the input into reads.
func TestParse(t *testing.T) {
	msg := func(id, data string) Event { return Event{ID: id, Type: "message", Data: data} }
	tests := []struct {
		name   string
		input  string
		lastID string
		want   parseResult
	}{
		{
			name:  "dispatch step 5: the type is message by default",
			input: "data: x\n\n",
			want:  parseResult{Events: []Event{msg("", "x")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "field event: sets the event type buffer (step 6)",
			input: "event: tick\ndata: x\n\n",
			want:  parseResult{Events: []Event{{Type: "tick", Data: "x"}}, End: "eof", Retry: noRetry},
		},
		{
			name:  "dispatch step 7: the event type buffer is reset",
			input: "event: a\ndata: 1\n\ndata: 2\n\nevent: a\ndata: 3\n\n",
			want:  parseResult{Events: []Event{{Type: "a", Data: "1"}, msg("", "2"), {Type: "a", Data: "3"}}, End: "eof", Retry: noRetry},
		},
		{
			name:  "field data: value and LF appended; step 3 removes the last LF",
			input: "data: YHOO\ndata: +2\ndata: 10\n\n",
			want:  parseResult{Events: []Event{msg("", "YHOO\n+2\n10")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "the standard's example: data with no value, and a block the end of file cuts",
			input: "data\n\ndata\ndata\n\ndata:",
			want:  parseResult{Events: []Event{msg("", ""), msg("", "\n")}, End: "cut", Retry: noRetry},
		},
		{
			name:  "the standard's example: one space after the colon is removed",
			input: "data:test\n\ndata: test\n\n",
			want:  parseResult{Events: []Event{msg("", "test"), msg("", "test")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "only one leading space is removed",
			input: "data:  two\n\ndata:\ttab\n\n",
			want:  parseResult{Events: []Event{msg("", " two"), msg("", "\ttab")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "the value is everything after the first colon",
			input: "data: a: b:c\n\n",
			want:  parseResult{Events: []Event{msg("", "a: b:c")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "field names are compared literally, with no case folding",
			input: "Data: x\nDATA: y\ndata : z\n data: w\n\ndata: v\n\n",
			want:  parseResult{Events: []Event{msg("", "v")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "unknown fields are ignored",
			input: "foo: bar\ndata: x\nbaz\n\n",
			want:  parseResult{Events: []Event{msg("", "x")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "the standard's example: comments, id and an empty id",
			input: ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n",
			want:  parseResult{Events: []Event{msg("1", "first event"), msg("", "second event"), msg("", " third event")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "comment lines inside an event are ignored",
			input: "data: a\n: note\ndata: b\n:\n\n",
			want:  parseResult{Events: []Event{msg("", "a\nb")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "dispatch step 1: the last event ID buffer is not reset",
			input: "id: 1\ndata: a\n\ndata: b\n\n",
			want:  parseResult{Events: []Event{msg("1", "a"), msg("1", "b")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "an id after the data of its block applies to that block",
			input: "data: a\nid: 7\n\n",
			want:  parseResult{Events: []Event{msg("7", "a")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "field id: a value containing NULL is ignored",
			input: "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\nid: \x00\ndata: c\n\n",
			want:  parseResult{Events: []Event{msg("1", "a"), msg("1", "b"), msg("1", "c")}, End: "eof", Retry: noRetry},
		},
		{
			name:   "the last event ID starts as the Last-Event-ID sent",
			input:  "data: a\n\nid: 42\ndata: b\n\n",
			lastID: "41",
			want:   parseResult{Events: []Event{msg("41", "a"), msg("42", "b")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "dispatch step 2: an empty data buffer dispatches nothing and resets the type",
			input: "event: tick\n\ndata: x\n\n",
			want:  parseResult{Events: []Event{msg("", "x")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "dispatch steps 1 and 2: an id-only block moves the last event ID (a heartbeat)",
			input: "id: 5\n\nid: 5\n\ndata: x\n\n",
			want:  parseResult{Events: []Event{{ID: "5", Heartbeat: true}, msg("5", "x")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "end of file: an event not followed by a blank line is discarded",
			input: "data: a\n\ndata: b\n",
			want:  parseResult{Events: []Event{msg("", "a")}, End: "cut", Retry: noRetry},
		},
		{
			name:  "end of file inside a line",
			input: "data: a\n\nid: 9\ndata: b",
			want:  parseResult{Events: []Event{msg("", "a")}, End: "cut", Retry: noRetry},
		},
		{
			name:  "end of file after a comment is clean",
			input: "data: a\n\n: bye\n: partial",
			want:  parseResult{Events: []Event{msg("", "a")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "empty input",
			input: "",
			want:  parseResult{End: "eof", Retry: noRetry},
		},
		{
			name:  "line ends: CRLF",
			input: "data: a\r\ndata: b\r\n\r\n",
			want:  parseResult{Events: []Event{msg("", "a\nb")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "line ends: CR",
			input: "id: 1\rdata: a\rdata: b\r\rdata: c\r\r",
			want:  parseResult{Events: []Event{msg("1", "a\nb"), msg("1", "c")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "line ends: mixed",
			input: "data: a\r\ndata: b\rdata: c\n\r\n",
			want:  parseResult{Events: []Event{msg("", "a\nb\nc")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "line ends: CR then CRLF is a line and a blank line",
			input: "data: a\r\r\ndata: b\r\n\r\n",
			want:  parseResult{Events: []Event{msg("", "a"), msg("", "b")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "line ends: LF then CR is a line and a blank line",
			input: "data: a\n\rdata: b\n\n",
			want:  parseResult{Events: []Event{msg("", "a"), msg("", "b")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "UTF-8 decode strips one leading byte order mark",
			input: "\xEF\xBB\xBFdata: x\n\n",
			want:  parseResult{Events: []Event{msg("", "x")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "a second byte order mark is text (an unknown field)",
			input: "\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\ndata: y\n\n",
			want:  parseResult{Events: []Event{msg("", "y")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "a byte order mark inside data is kept",
			input: "data: \xEF\xBB\xBFx\n\n",
			want:  parseResult{Events: []Event{msg("", "\uFEFFx")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "a start that is only part of a byte order mark is text",
			input: "\xEF\xBBdata: x\n\ndata: y\n\n",
			want:  parseResult{Events: []Event{msg("", "y")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "UTF-8 decode: well-formed text passes unchanged",
			input: "event: é\nid: ü\ndata: héllo 🙂 \uFFFD\n\n",
			want:  parseResult{Events: []Event{{ID: "ü", Type: "é", Data: "héllo 🙂 \uFFFD"}}, End: "eof", Retry: noRetry},
		},
		{
			name: "UTF-8 decode: one U+FFFD per maximal subpart of an ill-formed sequence",
			// truncated 3-byte, stray continuation, truncated 4-byte at the line end
			input: "data: a\xE2\x82b\x80c\xF0\x9F\x98\n\n",
			want:  parseResult{Events: []Event{msg("", "a\uFFFDb\uFFFDc\uFFFD")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "UTF-8 decode: overlong forms, surrogates and code points past U+10FFFF",
			input: "data: \xC0\xAF|\xE0\x80\xAF|\xED\xA0\x80|\xF4\x90\x80\x80|\xFF\n\n",
			want:  parseResult{Events: []Event{msg("", "\uFFFD\uFFFD|\uFFFD\uFFFD\uFFFD|\uFFFD\uFFFD\uFFFD|\uFFFD\uFFFD\uFFFD\uFFFD|\uFFFD")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "UTF-8 decode: a line end ends an ill-formed sequence",
			input: "id: \xE2\x82\ndata: \xF0\n\n",
			want:  parseResult{Events: []Event{msg("\uFFFD", "\uFFFD")}, End: "eof", Retry: noRetry},
		},
		{
			name:  "field retry: ASCII digits set the reconnection time, in milliseconds",
			input: "retry: 1500\n\n",
			want:  parseResult{End: "eof", Retry: 1500 * time.Millisecond},
		},
		{
			name:  "field retry: a value that is not only ASCII digits is ignored",
			input: "retry: 1.5\nretry: 12a\nretry: -1\nretry: +3\nretry:  7\nretry: 7 \nretry:\nretry\nretry: \u0661\n\n",
			want:  parseResult{End: "eof", Retry: noRetry},
		},
		{
			name:  "field retry: an ignored value keeps the previous one",
			input: "retry: 10\n\nretry: x\n\n",
			want:  parseResult{End: "eof", Retry: 10 * time.Millisecond},
		},
		{
			name:  "field retry: zero",
			input: "retry: 10\nretry: 0\n\n",
			want:  parseResult{End: "eof", Retry: 0},
		},
		{
			name:  "field retry: leading zeros",
			input: "retry: 0000000000000000000000000000007\n\n",
			want:  parseResult{End: "eof", Retry: 7 * time.Millisecond},
		},
		{
			name:  "field retry: the most milliseconds a time.Duration holds",
			input: "retry: 9223372036854\n\n",
			want:  parseResult{End: "eof", Retry: 9223372036854 * time.Millisecond},
		},
		{
			name:  "field retry: 13 digits past a time.Duration saturate",
			input: "retry: 9223372036855\n\n",
			want:  parseResult{End: "eof", Retry: time.Duration(1<<63 - 1)},
		},
		{
			name:  "field retry: 15 digits saturate",
			input: "retry: 999999999999999\n\n",
			want:  parseResult{End: "eof", Retry: time.Duration(1<<63 - 1)},
		},
		{
			name:  "field retry: 40 digits saturate",
			input: "retry: 1234567890123456789012345678901234567890\n\n",
			want:  parseResult{End: "eof", Retry: time.Duration(1<<63 - 1)},
		},
		{
			name:  "field retry: applies even in a block cut by the end of file",
			input: "retry: 20\ndata: a\n",
			want:  parseResult{End: "cut", Retry: 20 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for how, r := range readers(tt.input) {
				got := parseAll(r(), tt.lastID, defaultMaxEventSize)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Fatalf("parse(%q) read %s: (-want +got)\n%s", tt.input, how, diff)
				}
			}
		})
	}
}
