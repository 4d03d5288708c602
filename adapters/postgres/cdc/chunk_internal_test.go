package cdc

import (
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
	if diff := cmp.Diff(p, got); diff != "" {
		t.Fatalf("decode(encode(p)) (-want +got):\n%s", diff)
	}
	row := textRow([][]byte{[]byte("x\x00y"), nil, []byte(`1"`)})
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
		{name: "octal and hex", line: "\\101\\x42\\7\tN\\N\t\\\\N\n", want: []any{"AB\a", "NN", `\N`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b copyBatch
			arena, err := b.decode(nil, []byte(tt.line), 3)
			if err != nil {
				t.Fatalf("decode() = %v", err)
			}
			var got []any
			for _, sp := range b.spans {
				if sp.off < 0 {
					got = append(got, nil)
					continue
				}
				got = append(got, string(arena[sp.off:sp.off+sp.n]))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("decode(%q) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
	for _, line := range []string{"1\t2\n", "1\t2\t3\t4\n", "1\\t\t2\n", "1\t2\t3\t\\N\n"} {
		var b copyBatch
		if _, err := b.decode(nil, []byte(line), 3); err == nil {
			t.Errorf("decode(%q) = nil error, want one for a wrong number of columns", line)
		}
	}
}
