package prom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Replication is what a replication Source reports of a stream's distance
// behind its server (cdc.Source.Health reads each field).
type Replication struct {
	// CommitLag is how long before the report the change the Store holds
	// was committed on the server.
	CommitLag time.Duration
	// RetainedBytes is the WAL the server keeps for the stream's slot.
	RetainedBytes int64
	// WALStatus is the slot's wal_status: reserved, extended, unreserved
	// or lost.
	WALStatus string
	// FailoverReady reports that a promoted standby would go on from the
	// stream's cursor.
	FailoverReady bool
}

// walStatuses are the values of pg_replication_slots.wal_status, each a
// series of resumable_replication_wal_status.
var walStatuses = []string{"reserved", "extended", "unreserved", "lost"}

// ReplicationHook returns the function that records, under a stream's
// name, the last Replication reported for it (call it each time the
// Source's health is read, e.g. on a ticker). It feeds
// resumable_replication_commit_lag_seconds,
// resumable_replication_retained_wal_bytes,
// resumable_replication_wal_status{status} (1 for the slot's status, 0 for
// the others) and resumable_replication_failover_ready (0 or 1), labelled
// "name"; a name's series stay once reported. The function is safe for
// concurrent use. A nil c records nothing.
func ReplicationHook(c *Collector) func(name string, r Replication) {
	if c == nil {
		return func(string, Replication) {}
	}
	return func(name string, r Replication) {
		name = labelValue(name)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.repl == nil {
			c.repl = make(map[string]Replication)
		}
		c.repl[name] = r
	}
}

// replSample is what a scrape reads of a name's replication.
type replSample struct {
	name string
	Replication
}

// collectReplication sends the replication series of samples.
func (c *Collector) collectReplication(ch chan<- prometheus.Metric, samples []replSample) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, s := range samples {
		gauge(c.commitLag, s.CommitLag.Seconds(), s.name)
		gauge(c.retained, float64(s.RetainedBytes), s.name)
		for _, st := range walStatuses {
			gauge(c.walStatus, bool01(s.WALStatus == st), s.name, st)
		}
		gauge(c.failoverReady, bool01(s.FailoverReady), s.name)
	}
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
