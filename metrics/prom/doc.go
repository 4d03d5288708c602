// Package prom exports the counters of [stream.Resumer]s, and of anything
// else that reports through [stream.Hooks] (the Kubernetes RetryWatcher), as
// Prometheus metrics.
//
// Make one [Collector], register it once, and attach each stream to it under
// a name with [Hooks]:
//
//	c, err := prom.NewCollector("resumable")
//	...
//	prometheus.MustRegister(c)
//	h, detach := prom.Hooks[string](c, "orders")
//	defer detach() // once the stream is done
//	r, err := stream.New(src, extract, store, stream.WithHooks(h))
//
// Every series carries a "name" label (prefix: the namespace given to
// [NewCollector] and "_"; "resumable_" below):
//
//	resumable_events_total{name}                 events handled and committed, a resync's replay included
//	resumable_progress_events_total{name}        progress-only events committed (bookmarks)
//	resumable_opens_total{name}                  successful Opens
//	resumable_clean_ends_total{name}             connections that ended without a failure (io.EOF)
//	resumable_failures_total{name, action}       failures by verdict: action="retry", "fail" or "expired"
//	resumable_resyncs_total{name}                completed resyncs
//	resumable_saves_total{name}                  Store saves that succeeded
//	resumable_save_errors_total{name}            Store saves that failed
//	resumable_connected{name}                    streams with an open connection
//	resumable_streams{name}                      streams attached and not yet detached
//	resumable_last_commit_age_seconds{name}      seconds since a cursor was last committed (see below)
//	resumable_reconnect_delay_seconds{name}      histogram of the wait before each reopen
//
// [ReplicationHook] records what a replication Source reports of its slot
// (cdc.Source.Health), under the stream's name:
//
//	resumable_replication_commit_lag_seconds{name}  seconds since the change the Store holds was committed
//	resumable_replication_retained_wal_bytes{name}  WAL the server keeps for the slot
//	resumable_replication_wal_status{name, status}  1 for the slot's wal_status, 0 for the others
//	resumable_replication_failover_ready{name}      1 when a promoted standby would go on from the cursor
//
// Rules of use:
//   - Several streams may share a name: counters add up, connected counts
//     those connected, the commit age is that of the latest commit. Name
//     each of a few long-lived streams; give one name to thousands of
//     short-lived ones.
//   - Call the detach function once the stream is done (Run returned, or the
//     watcher's Done channel closed). The last stream of a name to detach
//     drops the name's series; a name attached again starts from zero, which
//     rate and increase read as a counter reset.
//   - The per-event path (OnCommit) is one atomic increment on a counter of
//     the stream's own: no lock, no clock, no allocation.
//   - The commit age is computed at scrape time, so it reads low by at most
//     the time between two scrapes; before the first commit it counts from
//     the name's first attach. Progress-only events count as commits.
//
// [OwnerHook] counts the ownership changes of an etcd.Group member under a
// "member" label. A nil *Collector counts nothing. Alerting rules and costs
// are in docs/metrics.md in the repository.
package prom
