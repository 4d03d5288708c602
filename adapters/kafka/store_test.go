package kafka_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/adapters/kafka"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// stores is a WithStore opener over memory Stores, one per partition,
// some holding a cursor from the start.
type stores struct {
	mu     sync.Mutex
	byPart map[int32]*cursor.Memory[int64]
	opened int
}

func newStores(initial map[int32]int64) *stores {
	s := &stores{byPart: map[int32]*cursor.Memory[int64]{}}
	for p, c := range initial {
		s.byPart[p] = cursor.NewMemory(c)
	}
	return s
}

func (s *stores) open(_ context.Context, _ string, p int32) (cursor.Store[int64], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opened++
	if s.byPart[p] == nil {
		s.byPart[p] = cursor.NewMemory[int64](-1)
	}
	return s.byPart[p], nil
}

func (s *stores) cursors(t *testing.T) map[int32]int64 {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	got := map[int32]int64{}
	for p, m := range s.byPart {
		c, err := m.Load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got[p] = c
	}
	return got
}

// With WithStore, a partition whose Store holds a cursor is read from the
// offset after it, whatever the group committed (here: its end); one whose
// Store holds none falls back to the group's committed offset. Every
// record handled is saved to the partition's Store, and the group's
// offsets follow.
func TestGroupStoreStartsAfterItsCursor(t *testing.T) {
	c := newCluster(t, 2, "orders")
	c.produce(t, records("orders", 2, 20, 4)...) // offsets 0..9 in each partition
	var committed kadm.Offsets
	committed.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 10, LeaderEpoch: -1})
	committed.Add(kadm.Offset{Topic: "orders", Partition: 1, At: 10, LeaderEpoch: -1})
	if err := c.adm.CommitAllOffsets(context.Background(), "billing", committed); err != nil {
		t.Fatal(err)
	}
	st := newStores(map[int32]int64{0: 4}) // partition 0 handled up to 4; partition 1 nothing stored
	g := c.group(t, "billing", []string{"orders"}, kafka.WithStore(st.open))
	var l log
	r := start(g, func(_ context.Context, rec *kgo.Record) error {
		l.add("a", rec)
		return nil
	})
	c.produce(t, records("orders", 2, 4, 4)...) // offsets 10, 11 in each partition
	eventually(t, "the records after the stores' cursors handled", func() bool { return l.len() >= 9 })
	eventually(t, "the group's offsets at the end", func() bool {
		return cmp.Equal(map[int32]int64{0: 12, 1: 12}, c.committed(t, "billing", "orders"))
	})
	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}
	got := map[int32][]int64{}
	for _, h := range l.snapshot() {
		got[h.partition] = append(got[h.partition], h.offset)
	}
	want := map[int32][]int64{0: {5, 6, 7, 8, 9, 10, 11}, 1: {10, 11}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("offsets handled per partition (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[int32]int64{0: 11, 1: 11}, st.cursors(t)); diff != "" {
		t.Errorf("the stores' cursors (-want +got):\n%s", diff)
	}
	if st.opened != 2 {
		t.Errorf("opened %d stores, want 2", st.opened)
	}
}

// handlerStore is a memory Store that commits in the handler's
// transaction, as postgres.Transactional's does.
type handlerStore struct{ *cursor.Memory[int64] }

func (handlerStore) CommitsInHandler() bool { return true }

// A Store that commits in the handler's transaction refuses concurrent
// handlers: the Run ends with an error matching stream.ErrInvalidOption at
// the first assignment, and an error opening a Store ends it too.
func TestGroupStoreErrors(t *testing.T) {
	c := newCluster(t, 1, "orders")
	c.produce(t, records("orders", 1, 3, 1)...)
	boom := errors.New("boom")
	tests := []struct {
		name string
		open func(context.Context, string, int32) (cursor.Store[int64], error)
		opts []stream.Option
		want error
	}{
		{name: "handler-committing store with concurrency",
			open: func(context.Context, string, int32) (cursor.Store[int64], error) {
				return handlerStore{cursor.NewMemory[int64](-1)}, nil
			},
			opts: []stream.Option{stream.WithConcurrency(4)}, want: stream.ErrInvalidOption},
		{name: "open fails",
			open: func(context.Context, string, int32) (cursor.Store[int64], error) { return nil, boom },
			want: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := c.group(t, "g-"+tt.name, []string{"orders"}, kafka.WithStore(tt.open))
			handled := 0
			err := g.Run(context.Background(), func(context.Context, *kgo.Record) error {
				handled++
				return nil
			}, tt.opts...)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Run() = %v, want an error matching %v", err, tt.want)
			}
			if handled != 0 {
				t.Errorf("handled %d records, want none", handled)
			}
		})
	}
}

// Partitions reports the group's committed offset from the assignment on,
// before the member handled or committed anything, and the lag behind it.
func TestGroupPartitionsCommittedAtAssignment(t *testing.T) {
	c := newCluster(t, 1, "orders")
	c.produce(t, records("orders", 1, 10, 2)...)
	var committed kadm.Offsets
	committed.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 7, LeaderEpoch: -1})
	if err := c.adm.CommitAllOffsets(context.Background(), "billing", committed); err != nil {
		t.Fatal(err)
	}
	g := c.group(t, "billing", []string{"orders"})
	block := make(chan struct{})
	r := start(g, func(ctx context.Context, _ *kgo.Record) error {
		select { // nothing is handled until the test looked
		case <-block:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	want := []kafka.PartitionStats{{Topic: "orders", Partition: 0, HighWatermark: 10, Handled: -1, Committed: 7, Lag: 3, Queued: 2, InFlight: 0}} // one handler: stream.Stats counts no record in flight
	deadline := time.Now().Add(30 * time.Second)
	for got := g.Partitions(); !cmp.Equal(want, got); got = g.Partitions() {
		if time.Now().After(deadline) {
			t.Fatalf("Partitions() (-want +got):\n%s", cmp.Diff(want, got))
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(block)
	eventually(t, "the group's offset at the end", func() bool { return c.committed(t, "billing", "orders")[0] == 10 })
	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}
}
