package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/internal/badarg"
)

// The headers [DeadLetter] adds to a parked record, after the record's own.
const (
	// HeaderTopic names the topic the record was read from.
	HeaderTopic = "resumable-topic"
	// HeaderPartition holds its partition, in decimal.
	HeaderPartition = "resumable-partition"
	// HeaderOffset holds its offset, in decimal.
	HeaderOffset = "resumable-offset"
	// HeaderError holds the handler's last error (a *stream.HandlerError's
	// text, with the number of tries).
	HeaderError = "resumable-error"
)

// DeadLetter returns a function for stream.WithDeadLetter that produces
// a record whose handler tries are spent to the topic topic through cl
// (a producing franz-go client), and returns once the broker acknowledged
// it: the stream commits past the record only then. The parked record has
// the same key, value and headers, plus [HeaderTopic], [HeaderPartition],
// [HeaderOffset] and [HeaderError]. A crash between the produce and the
// commit parks the record again. The function is safe for concurrent use.
// With a nil cl or an empty topic every park fails with an error matching
// stream.ErrInvalidOption, which ends Run with the record uncommitted.
func DeadLetter(cl *kgo.Client, topic string) func(ctx context.Context, r *kgo.Record, err error) error {
	return func(ctx context.Context, r *kgo.Record, cause error) error {
		if err := deadLetterArgs(cl, topic); err != nil {
			return err
		}
		headers := make([]kgo.RecordHeader, 0, len(r.Headers)+4)
		headers = append(headers, r.Headers...)
		headers = append(headers,
			kgo.RecordHeader{Key: HeaderTopic, Value: []byte(r.Topic)},
			kgo.RecordHeader{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
			kgo.RecordHeader{Key: HeaderOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
			kgo.RecordHeader{Key: HeaderError, Value: []byte(fmt.Sprint(cause))},
		)
		parked := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: headers}
		if err := cl.ProduceSync(ctx, parked).FirstErr(); err != nil {
			return fmt.Errorf("kafka: parking topic %s partition %d offset %d in topic %s: %w", r.Topic, r.Partition, r.Offset, topic, err)
		}
		return nil
	}
}

func deadLetterArgs(cl *kgo.Client, topic string) error {
	var errs []error
	if cl == nil {
		errs = append(errs, badarg.New("kafka: DeadLetter", "cl", nil, "must not be nil"))
	}
	if topic == "" {
		errs = append(errs, badarg.New("kafka: DeadLetter", "topic", topic, "must not be empty"))
	}
	return errors.Join(errs...)
}
