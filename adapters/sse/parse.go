package sse

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"sync/atomic"
	"time"

	"github.com/resumable-go/resumable/internal/digits"
)

// parser interprets one connection's event stream as the WHATWG HTML
// standard's "Interpreting an event stream" (§9.2.6) says. It reads its own
// buffer, so that a line never costs an allocation, and returns events with
// strings of their own. It starts no goroutine and is used by one goroutine.
type parser struct {
	r          io.Reader
	buf        []byte // buf[start:end] is read and not yet parsed
	start, end int
	scan       int   // buf[start:scan] holds no line end: the scan resumes at scan
	err        error // the read error that ended the input, once met
	max        int   // the Source's MaxEventSize

	bomDone bool // the leading byte order mark was looked for
	skipLF  bool // the last line ended in CR: an LF right after it is part of that line end

	data   []byte        // the data buffer, raw; decoded at dispatch
	typ    []byte        // the event type buffer, raw
	idBuf  string        // the last event ID buffer, decoded
	lastID string        // the last event ID string: idBuf as of the last blank line
	typStr string        // the type of the last event dispatched with one, reused while it repeats
	size   int           // bytes of the field lines of the event being received
	fields bool          // a field line was read since the last blank line
	alive  bool          // a comment was read since the parser last returned
	retry  *atomic.Int64 // the Source's reconnection time, set by retry: fields
}

// bom is the UTF-8 byte order mark that "UTF-8 decode" strips from the start.
var bom = []byte("\xEF\xBB\xBF")

// initialBuffer is the read buffer of a new connection; it grows, up to the
// longest line allowed, only for a longer line.
const initialBuffer = 4 << 10

// newParser returns a parser of r whose last event ID starts as lastID, the
// Last-Event-ID sent, as browsers do: the standard starts it empty, which
// would reset a resumed cursor at the first event without id:.
func newParser(r io.Reader, lastID string, maxSize int, retry *atomic.Int64) parser {
	return parser{
		r:      r,
		buf:    make([]byte, min(initialBuffer, maxSize+1)),
		max:    maxSize,
		idBuf:  lastID,
		lastID: lastID,
		retry:  retry,
	}
}

// errCut is the end of input inside an event, whose lines are then discarded
// ("any pending data must be discarded").
var errCut = fmt.Errorf("sse: connection closed inside an event: %w", io.ErrUnexpectedEOF)

// next returns the next event: a dispatched one, or a heartbeat (see
// [Event.Heartbeat]). At the end of input it returns io.EOF when the input
// ended between events and an error matching io.ErrUnexpectedEOF when it
// ended inside one. Other errors match ErrEventTooLarge or wrap the
// reader's error. After an error, next must not be called again.
func (p *parser) next() (Event, error) {
	for {
		line, ok := p.line()
		if ok {
			if ev, ok, err := p.process(line); ok || err != nil {
				return ev, err
			}
			continue
		}
		// No complete line is buffered: report a heartbeat seen since the
		// last return before waiting for more input.
		if p.alive {
			p.alive = false
			return Event{ID: p.lastID, Heartbeat: true}, nil
		}
		if p.end-p.start > p.max {
			return Event{}, p.tooLarge("a line", p.end-p.start)
		}
		if err := p.fill(); err != nil {
			return Event{}, p.endError(err)
		}
	}
}

// line returns the next complete line without its line end, as a slice of
// the buffer valid until the next fill, or ok false when none is buffered.
func (p *parser) line() (line []byte, ok bool) {
	if !p.bomDone {
		b := p.buf[p.start:p.end]
		if len(b) < len(bom) && bytes.HasPrefix(bom, b) && p.err == nil {
			return nil, false // too few bytes yet to tell
		}
		if bytes.HasPrefix(b, bom) {
			p.start += len(bom)
		}
		p.bomDone = true
	}
	if p.skipLF && p.start < p.end {
		p.skipLF = false
		if p.buf[p.start] == '\n' {
			p.start++ // the LF of a CRLF whose CR ended the previous line
		}
	}
	p.scan = max(p.scan, p.start)
	i := indexLineEnd(p.buf[p.scan:p.end])
	if i < 0 {
		p.scan = p.end
		return nil, false
	}
	i += p.scan
	line = p.buf[p.start:i]
	p.skipLF = p.buf[i] == '\r'
	p.start, p.scan = i+1, i+1
	return line, true
}

// indexLineEnd returns the index of the first CR or LF in b, or -1.
func indexLineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	return i
}

// fill reads more input after the buffered part of a line, moving that
// part to the front and growing the buffer (up to max+1 bytes) when full.
func (p *parser) fill() error {
	if p.err != nil {
		return p.err
	}
	if p.start > 0 {
		n := copy(p.buf, p.buf[p.start:p.end])
		p.scan -= p.start
		p.start, p.end = 0, n
	}
	if p.end == len(p.buf) {
		grown := make([]byte, min(2*len(p.buf), p.max+1))
		copy(grown, p.buf[:p.end])
		p.buf = grown
	}
	for range 100 {
		n, err := p.r.Read(p.buf[p.end:])
		p.end += n
		if err != nil {
			p.err = err
		}
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	p.err = io.ErrNoProgress // as bufio does for a reader that returns 0, nil forever
	return p.err
}

// endError turns the error that ended the input into next's.
func (p *parser) endError(err error) error {
	if err != io.EOF {
		return fmt.Errorf("sse: reading the event stream: %w", err)
	}
	if rest := p.buf[p.start:p.end]; p.fields || len(rest) > 0 && rest[0] != ':' {
		return errCut
	}
	return io.EOF
}

// process handles one line; ok reports that ev is to be returned.
func (p *parser) process(line []byte) (ev Event, ok bool, err error) {
	if len(line) == 0 { // a blank line: dispatch the event
		return p.dispatch()
	}
	if line[0] == ':' { // a comment: ignore the line (a heartbeat for us)
		p.alive = true
		return Event{}, false, nil
	}
	p.fields = true
	if p.size += len(line); p.size > p.max {
		return Event{}, false, p.tooLarge("an event", p.size)
	}
	name, value := line, line[:0] // a line without a colon: the whole line names the field, its value is empty
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:] // one leading space is removed
		}
	}
	switch string(name) { // field names are compared literally
	case "event":
		p.typ = append(p.typ[:0], value...)
	case "data":
		p.data = append(append(p.data, value...), '\n')
	case "id":
		if bytes.IndexByte(value, 0) < 0 && string(value) != p.idBuf { // an id containing NULL is ignored
			p.idBuf = decodeString(value)
		}
	case "retry":
		if d, ok := parseRetry(value); ok {
			p.retry.Store(int64(d))
		}
	}
	return Event{}, false, nil
}

// dispatch follows "dispatch the event" for web browsers, returning the
// event rather than queueing a task.
func (p *parser) dispatch() (ev Event, ok bool, err error) {
	p.size, p.fields = 0, false
	moved := p.lastID != p.idBuf
	p.lastID = p.idBuf    // step 1: the buffer is not reset
	if len(p.data) == 0 { // step 2: nothing to dispatch
		p.typ = p.typ[:0]
		if moved { // but the server moved the cursor: report it now
			p.alive = false
			return Event{ID: p.lastID, Heartbeat: true}, true, nil
		}
		return Event{}, false, nil
	}
	ev = Event{
		ID:   p.lastID,                             // step 5: lastEventId
		Type: "message",                            // step 5: the type...
		Data: decodeString(p.data[:len(p.data)-1]), // step 3: without the final LF
	}
	if len(p.typ) > 0 { // step 6: ...unless the event type buffer says otherwise
		if string(p.typ) != p.typStr {
			p.typStr = decodeString(p.typ)
		}
		ev.Type = p.typStr
	}
	p.data, p.typ = p.data[:0], p.typ[:0] // step 7
	p.alive = false
	return ev, true, nil
}

// tooLarge returns the error for what (a line, an event) of n bytes.
func (p *parser) tooLarge(what string, n int) error {
	return fmt.Errorf("%w: %s of %d bytes or more, over MaxEventSize %d", ErrEventTooLarge, what, n, p.max)
}

// maxMillis is the most milliseconds a time.Duration holds.
const maxMillis = math.MaxInt64 / int64(time.Millisecond)

// parseRetry reads a retry: value: one or more ASCII digits, in
// milliseconds. A value longer than a time.Duration holds saturates at the
// longest one (about 292 years) rather than overflowing.
func parseRetry(b []byte) (time.Duration, bool) {
	n, ok := digits.Parse(b, maxMillis)
	if !ok {
		return 0, false
	}
	if n > maxMillis {
		return math.MaxInt64, true
	}
	return time.Duration(n) * time.Millisecond, true
}
