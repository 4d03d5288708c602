package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

var cursorProgressOnly = cursor.ProgressOnly

func TestCompare(t *testing.T) {
	tests := []struct {
		name string
		a, b etcd.Cursor
		want int
	}{
		{name: "equal whole", a: etcd.Cursor{Revision: 5}, b: etcd.Cursor{Revision: 5}, want: 0},
		{name: "equal partial", a: etcd.Cursor{Revision: 5, Index: 2}, b: etcd.Cursor{Revision: 5, Index: 2}, want: 0},
		{name: "lower revision", a: etcd.Cursor{Revision: 4}, b: etcd.Cursor{Revision: 5, Index: 1}, want: -1},
		{name: "higher revision", a: etcd.Cursor{Revision: 6, Index: 1}, b: etcd.Cursor{Revision: 5}, want: 1},
		{name: "partial before whole", a: etcd.Cursor{Revision: 5, Index: 9}, b: etcd.Cursor{Revision: 5}, want: -1},
		{name: "whole after partial", a: etcd.Cursor{Revision: 5}, b: etcd.Cursor{Revision: 5, Index: 1}, want: 1},
		{name: "by index", a: etcd.Cursor{Revision: 5, Index: 1}, b: etcd.Cursor{Revision: 5, Index: 2}, want: -1},
		{name: "zero before all", a: etcd.Cursor{}, b: etcd.Cursor{Revision: 1, Index: 1}, want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := etcd.Compare(tt.a, tt.b); got != tt.want {
				t.Errorf("Compare(%v, %v) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

// TestCursorJSON checks the file format of a Cursor under cursor.JSON, the
// codec its users store it with.
func TestCursorJSON(t *testing.T) {
	codec := cursor.JSON[etcd.Cursor]()
	for _, c := range []etcd.Cursor{{}, {Revision: 12}, {Revision: 12, Index: 3}, {Revision: 12, Index: 3, Cluster: 1<<64 - 1}} {
		data, err := codec.Encode(c)
		if err != nil {
			t.Fatalf("Encode(%v) = %v", c, err)
		}
		back, err := codec.Decode(data)
		if err != nil || back != c {
			t.Errorf("Decode(Encode(%v)) = %v, %v", c, back, err)
		}
	}
	if data, _ := codec.Encode(etcd.Cursor{Revision: 12, Index: 3}); string(data) != "{\"revision\":12,\"index\":3}\n" {
		t.Errorf("Encode() = %q", data)
	}
	if data, _ := codec.Encode(etcd.Cursor{Revision: 12, Cluster: 0xcdf818194e3a8c32}); string(data) != "{\"revision\":12,\"index\":0,\"cluster\":14841639068965178418}\n" {
		t.Errorf("Encode() with a cluster = %q", data)
	}
	// A cursor saved before cursors recorded their cluster.
	if c, err := codec.Decode([]byte(`{"revision":12,"index":3}`)); err != nil || c != (etcd.Cursor{Revision: 12, Index: 3}) {
		t.Errorf("Decode() of a cursor without a cluster = %+v, %v", c, err)
	}
	tests := []struct {
		name string
		data string
	}{
		{name: "empty", data: ""},
		{name: "negative cluster", data: `{"revision":1,"index":0,"cluster":-1}`},
		{name: "cluster as a string", data: `{"revision":1,"index":0,"cluster":"cdf818194e3a8c32"}`},
		{name: "unknown field", data: `{"revision":1,"idx":1}`},
		{name: "truncated", data: `{"revision":1`},
		{name: "bare number", data: `12`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := codec.Decode([]byte(tt.data)); err == nil {
				t.Errorf("Decode(%q) = %v, nil; want an error", tt.data, c)
			}
		})
	}
}

// TestNegativeCursor checks that a cursor no watch can start from (an
// operator's edit gone wrong) stops the stream at once.
func TestNegativeCursor(t *testing.T) {
	c := newClient(t)
	for _, bad := range []etcd.Cursor{{Revision: -1}, {Revision: 1, Index: -1}} {
		r, err := etcd.NewResumer(c, newPrefix(t), cursor.NewMemory(bad))
		if err != nil {
			t.Fatalf("NewResumer() = %v", err)
		}
		err = r.Run(ctxFor(t), func(context.Context, etcd.Event) error { return nil })
		if !errors.Is(err, stream.ErrInvalidOption) || !strings.Contains(fmt.Sprint(err), "must be at least 0") {
			t.Errorf("Run() from %+v = %v, want an error matching %v that names the bad cursor", bad, err, stream.ErrInvalidOption)
		}
	}
}

func TestCursorString(t *testing.T) {
	for c, want := range map[etcd.Cursor]string{
		{Revision: 12}:           "revision 12",
		{Revision: 12, Index: 3}: "revision 12 event 3",
	} {
		if got := c.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", c, got, want)
		}
	}
}
