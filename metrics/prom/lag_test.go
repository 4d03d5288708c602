package prom_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/resumable-go/resumable/metrics/prom"
)

// Each scrape reads the partitions afresh: lag is end minus committed,
// never negative, and what is unknown (-1) is left out; a partition gone
// from the reading is gone from the metrics.
func TestLagCollector(t *testing.T) {
	var mu sync.Mutex
	parts := []prom.Lag{
		{Topic: "orders", Partition: 0, End: 120, Committed: 100, InFlight: 7},
		{Topic: "orders", Partition: 1, End: 50, Committed: 60, InFlight: 0}, // a commit newer than the last fetch
		{Topic: "orders", Partition: 2, End: -1, Committed: 5, InFlight: 1},
		{Topic: "refunds", Partition: 0, End: 9, Committed: -1, InFlight: 0},
	}
	c := prom.NewLagCollector("billing-1", func() []prom.Lag {
		mu.Lock()
		defer mu.Unlock()
		return parts
	})
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP resumable_partition_committed_offset The consumer's committed offset of the partition.
# TYPE resumable_partition_committed_offset gauge
resumable_partition_committed_offset{member="billing-1",partition="0",topic="orders"} 100
resumable_partition_committed_offset{member="billing-1",partition="1",topic="orders"} 60
resumable_partition_committed_offset{member="billing-1",partition="2",topic="orders"} 5
# HELP resumable_partition_end_offset The offset after the partition's last record (high watermark).
# TYPE resumable_partition_end_offset gauge
resumable_partition_end_offset{member="billing-1",partition="0",topic="orders"} 120
resumable_partition_end_offset{member="billing-1",partition="1",topic="orders"} 50
resumable_partition_end_offset{member="billing-1",partition="0",topic="refunds"} 9
# HELP resumable_partition_in_flight Records of the partition the consumer holds and has not committed.
# TYPE resumable_partition_in_flight gauge
resumable_partition_in_flight{member="billing-1",partition="0",topic="orders"} 7
resumable_partition_in_flight{member="billing-1",partition="1",topic="orders"} 0
resumable_partition_in_flight{member="billing-1",partition="2",topic="orders"} 1
resumable_partition_in_flight{member="billing-1",partition="0",topic="refunds"} 0
# HELP resumable_partition_lag Records of the partition past the consumer's committed offset: its end offset minus the committed one.
# TYPE resumable_partition_lag gauge
resumable_partition_lag{member="billing-1",partition="0",topic="orders"} 20
resumable_partition_lag{member="billing-1",partition="1",topic="orders"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	parts = parts[:1]
	parts[0].Committed = 120
	mu.Unlock()
	want = `
# HELP resumable_partition_lag Records of the partition past the consumer's committed offset: its end offset minus the committed one.
# TYPE resumable_partition_lag gauge
resumable_partition_lag{member="billing-1",partition="0",topic="orders"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "resumable_partition_lag"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c); n != 4 {
		t.Errorf("one partition gives %d metrics, want 4", n)
	}
}

// A nil read reports nothing.
func TestLagCollectorNilRead(t *testing.T) {
	if n := testutil.CollectAndCount(prom.NewLagCollector("m", nil)); n != 0 {
		t.Errorf("CollectAndCount() = %d, want 0", n)
	}
}
