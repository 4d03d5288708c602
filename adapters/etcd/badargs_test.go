package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// TestBadArgumentsNameTheArgument gives every constructor, option and
// entry point of the package a bad value: each error matches
// stream.ErrInvalidOption and its message names where and the argument.
func TestBadArgumentsNameTheArgument(t *testing.T) {
	c := newClient(t)
	codec := etcd.CursorCodec()
	store := cursor.NewMemory(etcd.Cursor{})
	group, err := etcd.NewGroup(c, "a", etcd.WithKeyPrefix(newPrefix(t)))
	if err != nil {
		t.Fatalf("NewGroup() = %v", err)
	}
	noop := func(ctx context.Context, _ *etcd.Owner) error { <-ctx.Done(); return nil }
	errOf := func(_ any, err error) error { return err }
	tests := []struct {
		name string
		err  error
		want []string // each in the message
	}{
		{name: "NewSource w", err: errOf(etcd.NewSource(nil, "p")), want: []string{"etcd: NewSource: w = nil"}},
		{name: "Open after", err: errOf(newSource(t, c, "p").Open(context.Background(), etcd.Cursor{Revision: -1})),
			want: []string{"etcd: Open: after = \"{revision -1, index 0}\""}},
		{name: "NewResumer client", err: errOf(etcd.NewResumer(nil, "p", store)), want: []string{"etcd: NewResumer: client = nil"}},
		{name: "NewResumer every argument at once", err: errOf(etcd.NewResumer(nil, "p", nil, stream.WithConcurrency(0))),
			want: []string{"etcd: NewResumer: client = nil", "etcd: NewResumer: store = nil", "WithConcurrency"}},
		{name: "NewResumer stream option", err: errOf(etcd.NewResumer(c, "p", store, stream.WithConcurrency(0))), want: []string{"WithConcurrency"}},
		{name: "NewStore every argument at once", err: errOf(etcd.NewStore(nil, "", nil, etcd.Cursor{}, etcd.WithTimeout(-time.Second))),
			want: []string{"etcd: NewStore: kv = nil", `etcd: NewStore: key = ""`, "etcd: NewStore: codec = nil", "etcd: WithTimeout: d = -1s"}},
		{name: "WithTimeout", err: errOf(etcd.NewStore(c, "k", codec, etcd.Cursor{}, etcd.WithTimeout(-time.Second))),
			want: []string{"etcd: WithTimeout: d = -1s"}},
		{name: "NewOwnerStore every argument at once", err: errOf(etcd.NewOwnerStore[etcd.Cursor](nil, nil, etcd.Cursor{})),
			want: []string{"etcd: NewOwnerStore: o = nil", "etcd: NewOwnerStore: codec = nil"}},
		{name: "NewGroup client", err: errOf(etcd.NewGroup(nil, "a")), want: []string{"etcd: NewGroup: client = nil"}},
		{name: "NewGroup member empty", err: errOf(etcd.NewGroup(c, "")), want: []string{`etcd: NewGroup: member = ""`}},
		{name: "NewGroup member slash", err: errOf(etcd.NewGroup(c, "a/b")), want: []string{`etcd: NewGroup: member = "a/b"`}},
		{name: "NewGroup member space", err: errOf(etcd.NewGroup(c, "a b")), want: []string{`etcd: NewGroup: member = "a b"`}},
		{name: "WithTTL", err: errOf(etcd.NewGroup(c, "a", etcd.WithTTL(time.Millisecond))), want: []string{"etcd: WithTTL: d = 1ms"}},
		{name: "WithKeyPrefix", err: errOf(etcd.NewGroup(c, "a", etcd.WithKeyPrefix(""))), want: []string{`etcd: WithKeyPrefix: p = ""`}},
		{name: "WithGroupBackoff", err: errOf(etcd.NewGroup(c, "a", etcd.WithGroupBackoff(backoff.Exponential(backoff.WithMultiplier(0.5))))),
			want: []string{"etcd: WithGroupBackoff: p = "}},
		{name: "NewGroup every argument at once", err: errOf(etcd.NewGroup(nil, "", etcd.WithTTL(0), etcd.WithKeyPrefix(""))),
			want: []string{"client = nil", `member = ""`, "WithTTL: d = 0s", `WithKeyPrefix: p = ""`}},
		{name: "Group.Run run", err: group.Run(ctxFor(t), []string{"s"}, nil), want: []string{"etcd: Group.Run: run = nil"}},
		{name: "Group.Run stream empty", err: group.Run(ctxFor(t), []string{""}, noop), want: []string{`etcd: Group.Run: streams = ""`}},
		{name: "Group.Run stream slash", err: group.Run(ctxFor(t), []string{"a/b"}, noop), want: []string{`etcd: Group.Run: streams = "a/b"`}},
		{name: "Group.Run stream newline", err: group.Run(ctxFor(t), []string{"a\nb"}, noop), want: []string{`etcd: Group.Run: streams = "a\nb"`}},
		{name: "Group.Run stream twice", err: group.Run(ctxFor(t), []string{"s", "t", "s"}, noop), want: []string{`etcd: Group.Run: streams = "s": named twice`}},
		{name: "Group.Run every argument at once", err: group.Run(ctxFor(t), []string{"", "a/b"}, nil),
			want: []string{"run = nil", `streams = ""`, `streams = "a/b"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, stream.ErrInvalidOption) {
				t.Fatalf("err = %v, want one matching %v", tt.err, stream.ErrInvalidOption)
			}
			for _, w := range tt.want {
				if !strings.Contains(tt.err.Error(), w) {
					t.Errorf("err = %q, want it to contain %q", tt.err, w)
				}
			}
		})
	}
}
