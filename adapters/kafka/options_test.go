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

func TestNewGroupRefusesBadArguments(t *testing.T) {
	tests := []struct {
		name    string
		brokers []string
		group   string
		topics  []string
		opts    []kafka.Option
		want    string // in the error's text
	}{
		{name: "no broker", group: "g", topics: []string{"t"}, want: "brokers"},
		{name: "empty broker", brokers: []string{""}, group: "g", topics: []string{"t"}, want: "brokers"},
		{name: "empty group", brokers: []string{"b:9092"}, topics: []string{"t"}, want: "group"},
		{name: "no topic", brokers: []string{"b:9092"}, group: "g", want: "topics"},
		{name: "drain timeout", brokers: []string{"b:9092"}, group: "g", topics: []string{"t"},
			opts: []kafka.Option{kafka.WithDrainTimeout(0)}, want: "WithDrainTimeout"},
		{name: "commit interval", brokers: []string{"b:9092"}, group: "g", topics: []string{"t"},
			opts: []kafka.Option{kafka.WithCommitInterval(-time.Second)}, want: "WithCommitInterval"},
		{name: "fetch buffer", brokers: []string{"b:9092"}, group: "g", topics: []string{"t"},
			opts: []kafka.Option{kafka.WithFetchBuffer(0)}, want: "WithFetchBuffer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kafka.NewGroup(tt.brokers, tt.group, tt.topics, tt.opts...)
			if !errors.Is(err, stream.ErrInvalidOption) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewGroup() = %v, want an error matching %v naming %s", err, stream.ErrInvalidOption, tt.want)
			}
		})
	}
}

// Run refuses a nil handler and the stream options stream.New refuses,
// before it connects to anything.
func TestGroupRunRefusesBadArguments(t *testing.T) {
	g, err := kafka.NewGroup([]string{"127.0.0.1:1"}, "g", []string{"t"}, kafka.WithClientOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Run(context.Background(), nil); !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("Run(nil handler) = %v, want an error matching %v", err, stream.ErrInvalidOption)
	}
	handle := func(context.Context, *kgo.Record) error { return nil }
	if err := g.Run(context.Background(), handle, stream.WithConcurrency(0)); !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("Run(WithConcurrency(0)) = %v, want an error matching %v", err, stream.ErrInvalidOption)
	}
}

func TestDeadLetterRefusesNoClient(t *testing.T) {
	park := kafka.DeadLetter(nil, "parked")
	if err := park(context.Background(), &kgo.Record{}, errors.New("boom")); !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("park() = %v, want an error matching %v", err, stream.ErrInvalidOption)
	}
}
