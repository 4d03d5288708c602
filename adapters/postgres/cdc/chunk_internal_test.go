package cdc

import (
	"encoding/binary"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSnapshotAndSees(t *testing.T) {
	xmax, xip, err := parseSnapshot("4294967390:4294967400:4294967391,4294967395")
	if err != nil {
		t.Fatal(err)
	}
	// Epoch 1: the 32-bit xids pgoutput reports are the low halves.
	if xmax != 104 || !cmp.Equal(xip, []uint32{95, 99}) {
		t.Fatalf("parseSnapshot = %d, %v; want 104, [95 99]", xmax, xip)
	}
	k := &chunk{xmax: xmax, xip: xip}
	tests := []struct {
		name string
		xid  uint32
		want bool
	}{
		{name: "before xmin", xid: 90, want: true},
		{name: "running at the snapshot", xid: 95, want: false},
		{name: "between, committed", xid: 97, want: true},
		{name: "at xmax", xid: 104, want: false},
		{name: "after xmax", xid: 200, want: false},
		{name: "before the wrap", xid: 0xFFFFFFF0, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := k.sees(tt.xid); got != tt.want {
				t.Fatalf("sees(%d) = %t, want %t", tt.xid, got, tt.want)
			}
		})
	}
	if _, _, err := parseSnapshot("1:2"); err == nil {
		t.Fatal("parseSnapshot(1:2) = nil error")
	}
}

func TestProgressEncoding(t *testing.T) {
	p := progress{Tables: []tableName{{"public", "a,b"}, {"s", `q"t`}}, After: []string{"1", "x\x00y"}}
	got, err := decodeProgress(p.encode())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, got, cmp.AllowUnexported(progress{})); diff != "" {
		t.Fatalf("decode(encode(p)) (-want +got):\n%s", diff)
	}
	// The publication's tables are named by the first alone, and listed
	// again from it; the backfills after them by each.
	published := []tableName{{"a", "x"}, {"public", "a,b"}, {"public", "c"}, {"s", "d"}}
	listed := progress{Tables: []tableName{{"public", "a,b"}, {"public", "c"}, {"s", "d"}, {"s", `q"t`}}, After: []string{"1"}, Listed: 3}
	if enc, want := listed.encode(), `{"p":["public","a,b"],"t":[["s","q\"t"]],"k":["1"]}`; enc != want {
		t.Fatalf("encode() = %s, want %s", enc, want)
	}
	got, err = decodeProgress(listed.encode())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(listed, got.expanded(published), cmp.AllowUnexported(progress{})); diff != "" {
		t.Fatalf("decode(encode(p)).expanded() (-want +got):\n%s", diff)
	}
	if enc := (progress{Tables: []tableName{{"s", "d"}}, Listed: 1}).encode(); enc != `{"p":["s","d"]}` {
		t.Fatalf("encode() = %s, want the first table alone", enc)
	}
	row, err := decodeCopy(nil, []byte("x\\000y\t\\N\t1\"\n"), 3) // x NUL y, NULL, 1"
	if err != nil {
		t.Fatal(err)
	}
	at := string(appendProgress(nil, p.prefix(), row, []int{0, 2}))
	want := progress{Tables: p.Tables, After: []string{"x\x00y", `1"`}}.encode()
	if at != want {
		t.Fatalf("appendProgress = %s, want %s", at, want)
	}
	if (progress{}).encode() != "" {
		t.Fatal("an empty progress encodes as non-empty")
	}
	if _, err := decodeProgress("{"); err == nil {
		t.Fatal("decodeProgress({) = nil error")
	}
	if keyOf([][]byte{[]byte("a:1"), []byte("b")}) == keyOf([][]byte{[]byte("a"), []byte("1:b")}) {
		t.Fatal("keyOf confuses two keys")
	}
}

func TestCopyDecode(t *testing.T) {
	tests := []struct {
		name string
		line string
		want []any // string, or nil for NULL
	}{
		{name: "plain", line: "1\tab c\tx\n", want: []any{"1", "ab c", "x"}},
		{name: "empty and NULL", line: "\t\\N\t\n", want: []any{"", nil, ""}},
		{name: "escapes", line: "a\\tb\\\\c\t\\n\\r\\b\\f\\v\t\\N\n", want: []any{"a\tb\\c", "\n\r\b\f\v", nil}},
		{name: "NULL first and last", line: "\\N\tb\t\\N\n", want: []any{nil, "b", nil}},
		{name: "octal and hex", line: "\\101\\x42\\7\tN\\N\t\\\\N\n", want: []any{"AB\a", "NN", `\N`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := []byte("before")
			row, err := decodeCopy(prev, []byte(tt.line), 3)
			if err != nil {
				t.Fatalf("decodeCopy() = %v", err)
			}
			row = row[len(prev):]
			var got []any
			for i := range packedLen(row) {
				switch v, kind := packedCol(row, i); kind {
				case 'n':
					got = append(got, nil)
				default:
					got = append(got, string(v))
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("decodeCopy(%q) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
	for _, line := range []string{"1\t2\n", "1\t2\t3\t4\n", "1\\t\t2\n", "1\t2\t3\t\\N\n"} {
		if _, err := decodeCopy(nil, []byte(line), 3); err == nil {
			t.Errorf("decodeCopy(%q) = nil error, want one for a wrong number of columns", line)
		}
	}
}

// TestMsgReader: messages come out whole and in order however the bytes
// are split between reads, one larger than the buffer included; a size no
// message can have is an error, not an allocation.
func TestMsgReader(t *testing.T) {
	msg := func(typ byte, body string) []byte {
		b := append([]byte{typ}, binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))...)
		return append(b, body...)
	}
	big := strings.Repeat("x", 300<<10)
	var stream []byte
	want := []string{}
	for i := range 2000 {
		body := strconv.Itoa(i) + strings.Repeat("-", i%97)
		if i == 1000 {
			body = big
		}
		stream = append(stream, msg('d', body)...)
		want = append(want, "d"+body)
	}
	stream = append(stream, msg('Z', "I")...)
	want = append(want, "ZI")
	for _, split := range []int{1, 7, 4096, 1 << 20} {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			for b := stream; len(b) > 0; b = b[min(split, len(b)):] {
				if _, err := server.Write(b[:min(split, len(b))]); err != nil {
					return
				}
			}
		}()
		var r msgReader
		var got []string
		for range want {
			typ, body, err := r.next(client)
			if err != nil {
				t.Fatalf("split %d: next() after %d messages = %v", split, len(got), err)
			}
			got = append(got, string(typ)+string(body))
		}
		client.Close()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("split %d: messages (-want +got):\n%s", split, diff)
		}
		if r.buffered() != 0 {
			t.Fatalf("split %d: %d bytes left", split, r.buffered())
		}
	}
	// A size claimed and not sent takes memory only for what arrived.
	client, server := net.Pipe()
	go func() {
		defer server.Close()
		_, _ = server.Write(append([]byte{'d'}, binary.BigEndian.AppendUint32(nil, maxMessage)...))
		_, _ = server.Write(make([]byte, 300<<10))
	}()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var r msgReader
	if _, _, err := r.next(client); err == nil {
		t.Error("next() on a message cut short = nil error")
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("next() on a message claiming %d bytes and sending 300 KiB allocated %d bytes", maxMessage, got)
	}
	client.Close()
	for _, size := range []uint32{0, 3, maxMessage + 1, 1<<32 - 1} {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			_, _ = server.Write(append([]byte{'d'}, binary.BigEndian.AppendUint32(nil, size)...))
		}()
		var r msgReader
		if _, _, err := r.next(client); err == nil || !strings.Contains(err.Error(), "bytes from the server") {
			t.Errorf("next() on a message of size %d = %v, want an error saying so", size, err)
		}
		client.Close()
	}
}
