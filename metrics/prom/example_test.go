package prom_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/metrics/prom"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// A Collector registered once, a stream attached to it under a name, and
// the series served on a /metrics endpoint (here on loopback, by httptest).
func Example() {
	c, err := prom.NewCollector("resumable")
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	// A stream of three events whose first Open fails and whose first
	// connection breaks after one event.
	src := streamtest.NewSource([]string{"a", "b", "c"},
		streamtest.Step{Kind: streamtest.FailOpen},
		streamtest.Step{Kind: streamtest.BreakAfter, K: 1})
	hooks, detach := prom.Hooks[int64](c, "orders")
	defer detach() // once the stream is done: drops the series of "orders"
	r, err := stream.New(src, streamtest.Extract[string], cursor.NewMemory[int64](0),
		stream.WithHooks(hooks), stream.WithBackoff(backoff.Constant(0)))
	if err != nil {
		log.Fatal(err)
	}
	err = r.Run(context.Background(), func(context.Context, streamtest.Event[string]) error { return nil })
	if err != nil {
		log.Fatal(err)
	}

	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range []string{"resumable_events_total", "resumable_opens_total", "resumable_failures_total", "resumable_reconnect_delay_seconds_count"} {
			if strings.HasPrefix(line, name+"{") {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// resumable_events_total{name="orders"} 3
	// resumable_failures_total{action="expired",name="orders"} 0
	// resumable_failures_total{action="fail",name="orders"} 0
	// resumable_failures_total{action="retry",name="orders"} 2
	// resumable_opens_total{name="orders"} 2
	// resumable_reconnect_delay_seconds_count{name="orders"} 2
}

// The owner hook of a group member, fed here by hand as the hook of
// etcd.WithOwnerHook feeds it: two streams taken, one handed off, one lost.
func ExampleOwnerHook() {
	c, err := prom.NewCollector("resumable")
	if err != nil {
		log.Fatal(err)
	}
	owners := prom.OwnerHook(c)
	owners("worker-1", true, nil)                          // owns orders
	owners("worker-1", true, nil)                          // owns payments
	owners("worker-1", false, nil)                         // handed orders off
	owners("worker-1", false, errors.New("lease expired")) // lost payments

	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			fmt.Println(mf.GetName(), m.GetLabel()[0].GetValue(), m.GetCounter().GetValue()+m.GetGauge().GetValue())
		}
	}
	// Output:
	// resumable_handoffs_total worker-1 1
	// resumable_owned_streams worker-1 0
	// resumable_owner_losses_total worker-1 1
}

// The replication hook, fed here by hand as a ticker reading
// cdc.Source.Health feeds it: a stream 2.5 s behind, its slot keeping
// 1 MiB of WAL, not yet ready for a failover.
func ExampleReplicationHook() {
	c, err := prom.NewCollector("resumable")
	if err != nil {
		log.Fatal(err)
	}
	report := prom.ReplicationHook(c)
	report("orders", prom.Replication{CommitLag: 2500 * time.Millisecond, RetainedBytes: 1 << 20, WALStatus: "extended"})

	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			fmt.Println(mf.GetName(), strings.Join(labels, ","), m.GetGauge().GetValue())
		}
	}
	// Output:
	// resumable_replication_commit_lag_seconds name=orders 2.5
	// resumable_replication_failover_ready name=orders 0
	// resumable_replication_retained_wal_bytes name=orders 1.048576e+06
	// resumable_replication_wal_status name=orders,status=extended 1
	// resumable_replication_wal_status name=orders,status=lost 0
	// resumable_replication_wal_status name=orders,status=reserved 0
	// resumable_replication_wal_status name=orders,status=unreserved 0
}
