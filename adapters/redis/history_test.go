package redis_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/adapters/redis"
)

// TestParseInfo reads the replies the Source's identity script gives on
// Redis 7 and, without entries-added and max-deleted-entry-id, before it.
func TestParseInfo(t *testing.T) {
	type fields struct {
		Length, Added           int64
		Last, MaxDeleted, First string
		Edges                   int64
		OK                      bool
	}
	tests := []struct {
		name  string
		reply string
		want  fields
	}{
		{name: "redis 7", reply: "2 5 9-1 3-0 7-1 12", want: fields{Length: 2, Added: 5, Last: "9-1", MaxDeleted: "3-0", First: "7-1", Edges: 12, OK: true}},
		{name: "redis 7, empty stream", reply: "0 1 1-1 1-1  0", want: fields{Added: 1, Last: "1-1", MaxDeleted: "1-1", OK: true}},
		{name: "before redis 7", reply: "3 0 5-1  1-1 8", want: fields{Length: 3, Last: "5-1", First: "1-1", Edges: 8, OK: true}},
		{name: "before redis 7, empty stream", reply: "0 0 5-1   0", want: fields{Last: "5-1", OK: true}},
		{name: "too few fields", reply: "2 5 9-1", want: fields{}},
		{name: "no size", reply: "2 5 9-1 3-0 7-1", want: fields{}},
		{name: "length not a number", reply: "x 5 9-1 0-0 7-1 12", want: fields{}},
		{name: "size not a number", reply: "2 5 9-1 0-0 7-1 x", want: fields{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got fields
			got.Length, got.Added, got.Last, got.MaxDeleted, got.First, got.Edges, got.OK = redis.ParseInfo(tt.reply)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseInfo(%q) (-want +got):\n%s", tt.reply, diff)
			}
		})
	}
}
