package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/adapters/kafka"
	"github.com/resumable-go/resumable/stream"
)

// TestBadArgumentsNameTheArgument gives every constructor, option and
// entry point of the package a bad value: each error matches
// stream.ErrInvalidOption and its message names where and the argument.
func TestBadArgumentsNameTheArgument(t *testing.T) {
	brokers, topics := []string{"b:9092"}, []string{"t"}
	newGroup := func(opts ...kafka.Option) error {
		_, err := kafka.NewGroup(brokers, "g", topics, opts...)
		return err
	}
	group, err := kafka.NewGroup([]string{"127.0.0.1:1"}, "g", topics)
	if err != nil {
		t.Fatal(err)
	}
	handle := func(context.Context, *kgo.Record) error { return nil }
	tests := []struct {
		name string
		err  error
		want []string // each in the message
	}{
		{name: "NewGroup brokers nil", err: func() error { _, err := kafka.NewGroup(nil, "g", topics); return err }(),
			want: []string{"kafka: NewGroup: brokers = nil"}},
		{name: "NewGroup brokers empty name", err: func() error { _, err := kafka.NewGroup([]string{""}, "g", topics); return err }(),
			want: []string{`kafka: NewGroup: brokers = [""]`}},
		{name: "NewGroup group", err: func() error { _, err := kafka.NewGroup(brokers, "", topics); return err }(),
			want: []string{`kafka: NewGroup: group = ""`}},
		{name: "NewGroup topics", err: func() error { _, err := kafka.NewGroup(brokers, "g", []string{"t", ""}); return err }(),
			want: []string{`kafka: NewGroup: topics = ["t" ""]`}},
		{name: "WithDrainTimeout", err: newGroup(kafka.WithDrainTimeout(0)), want: []string{"kafka: WithDrainTimeout: d = 0s"}},
		{name: "WithCommitInterval", err: newGroup(kafka.WithCommitInterval(-time.Second)), want: []string{"kafka: WithCommitInterval: d = -1s"}},
		{name: "WithFetchBuffer", err: newGroup(kafka.WithFetchBuffer(0)), want: []string{"kafka: WithFetchBuffer: n = 0"}},
		{name: "WithStore", err: newGroup(kafka.WithStore(nil)), want: []string{"kafka: WithStore: open = nil"}},
		{name: "NewGroup every argument at once",
			err:  func() error { _, err := kafka.NewGroup(nil, "", nil, kafka.WithFetchBuffer(-1)); return err }(),
			want: []string{"brokers = nil", `group = ""`, "topics = nil", "WithFetchBuffer: n = -1"}},
		{name: "Group.Run handle", err: group.Run(context.Background(), nil), want: []string{"kafka: Group.Run: handle = nil"}},
		{name: "Group.RunBatch handle", err: group.RunBatch(context.Background(), nil), want: []string{"kafka: Group.RunBatch: handle = nil"}},
		{name: "Group.Run stream option", err: group.Run(context.Background(), handle, stream.WithConcurrency(0)), want: []string{"WithConcurrency"}},
		{name: "DeadLetter", err: kafka.DeadLetter(nil, "")(context.Background(), &kgo.Record{}, errors.New("boom")),
			want: []string{"kafka: DeadLetter: cl = nil", `kafka: DeadLetter: topic = ""`}},
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
