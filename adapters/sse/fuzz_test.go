package sse

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The fuzz targets compare the parser with a reference written line by line
// from the standards (WHATWG Encoding "UTF-8 decode", WHATWG HTML §9.2.6)
// for clarity, not speed: it decodes the whole input first, then splits and
// interprets the text.

// FuzzParse feeds input to the parser in reads of the sizes splits gives
// (cycled; each byte is a size less one) and checks that it produces what
// the reference does, whatever the split.
func FuzzParse(f *testing.F) {
	f.Add([]byte("id: 1\nevent: tick\ndata: a\ndata: b\n\n: ping\ndata: c\r\n\r\n"), []byte{0}, "")
	f.Add([]byte("\xEF\xBB\xBFdata: x\r\rid: 2\x003\rdata\n\nretry: 99999999999999\n\n"), []byte{3, 1}, "7")
	f.Add([]byte("data: \xE2\x82\xF0\x9F\x98\nid: 5\n\ndata:  y\n"), []byte{}, "")
	f.Add([]byte("data: a\r"), []byte{6, 0}, "x")
	f.Fuzz(func(t *testing.T, input, splits []byte, lastID string) {
		want := reference(input, lastID)
		got := parseAll(&splitReader{b: input, sizes: splits}, lastID, len(input)+1)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("parse(%q) in reads of %v, last ID %q: (-reference +parser)\n%s", input, splits, lastID, diff)
		}
	})
}

// FuzzDecode checks decodeString against the Encoding standard's decoder.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("a\xE2\x82b\x80c\xF0\x9F\x98"))
	f.Add([]byte("\xC0\xAF\xE0\x80\xAF\xED\xA0\x80\xF4\x90\x80\x80\xFF héllo 🙂"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := decodeString(b), utf8Decode(b); got != want {
			t.Fatalf("decodeString(%q) = %q, want %q", b, got, want)
		}
	})
}

// splitReader returns b in reads whose sizes cycle through sizes (each
// plus one), or all at once when sizes is empty.
type splitReader struct {
	b     []byte
	sizes []byte
	i     int
}

func (r *splitReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := len(r.b)
	if len(r.sizes) > 0 {
		n = int(r.sizes[r.i%len(r.sizes)]) + 1
		r.i++
	}
	n = copy(p, r.b[:min(n, len(r.b))])
	r.b = r.b[n:]
	return n, nil
}

// utf8Decode is the Encoding standard's UTF-8 decoder, step by step, in
// replacement mode, without the BOM handling of "UTF-8 decode".
func utf8Decode(b []byte) string {
	var out []rune
	cp, seen, needed := 0, 0, 0
	lower, upper := 0x80, 0xBF
	for i := 0; i < len(b); i++ {
		c := int(b[i])
		if needed == 0 {
			switch {
			case c <= 0x7F:
				out = append(out, rune(c))
			case c >= 0xC2 && c <= 0xDF:
				needed, cp = 1, c&0x1F
			case c >= 0xE0 && c <= 0xEF:
				if c == 0xE0 {
					lower = 0xA0
				}
				if c == 0xED {
					upper = 0x9F
				}
				needed, cp = 2, c&0xF
			case c >= 0xF0 && c <= 0xF4:
				if c == 0xF0 {
					lower = 0x90
				}
				if c == 0xF4 {
					upper = 0x8F
				}
				needed, cp = 3, c&0x7
			default:
				out = append(out, 0xFFFD)
			}
			continue
		}
		if c < lower || c > upper {
			cp, needed, seen = 0, 0, 0
			lower, upper = 0x80, 0xBF
			out = append(out, 0xFFFD)
			i-- // restore the byte to the queue
			continue
		}
		lower, upper = 0x80, 0xBF
		cp = cp<<6 | c&0x3F
		if seen++; seen == needed {
			out = append(out, rune(cp))
			cp, needed, seen = 0, 0, 0
		}
	}
	if needed != 0 { // end of queue inside a sequence
		out = append(out, 0xFFFD)
	}
	return string(out)
}

// reference interprets input as §9.2.6 reads, with heartbeats only for
// blocks that moved the last event ID (the parser's others depend on how
// the input was split into reads).
func reference(input []byte, lastID string) parseResult {
	text := utf8Decode([]byte(strings.TrimPrefix(string(input), "\xEF\xBB\xBF")))
	res := parseResult{Retry: noRetry}
	data, typ, idBuf, last, fields := "", "", lastID, lastID, false
	for {
		i := strings.IndexAny(text, "\r\n")
		if i < 0 {
			break
		}
		line := text[:i]
		if strings.HasPrefix(text[i:], "\r\n") {
			text = text[i+2:]
		} else {
			text = text[i+1:]
		}
		switch {
		case line == "": // dispatch
			fields = false
			moved := last != idBuf
			last = idBuf
			if data == "" {
				typ = ""
				if moved {
					res.Events = append(res.Events, Event{ID: last, Heartbeat: true})
				}
				continue
			}
			ev := Event{ID: last, Type: "message", Data: strings.TrimSuffix(data, "\n")}
			if typ != "" {
				ev.Type = typ
			}
			res.Events = append(res.Events, ev)
			data, typ = "", ""
		case line[0] == ':':
		default:
			fields = true
			field, value, found := strings.Cut(line, ":")
			if found {
				value = strings.TrimPrefix(value, " ")
			}
			switch field {
			case "event":
				typ = value
			case "data":
				data += value + "\n"
			case "id":
				if !strings.Contains(value, "\x00") {
					idBuf = value
				}
			case "retry":
				if value != "" && strings.Trim(value, "0123456789") == "" {
					res.Retry = referenceRetry(value)
				}
			}
		}
	}
	switch {
	case fields || text != "" && text[0] != ':':
		res.End = "cut"
	default:
		res.End = "eof"
	}
	return res
}

// referenceRetry converts a run of digits to milliseconds, saturating.
func referenceRetry(digits string) time.Duration {
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(n) * time.Millisecond
}
