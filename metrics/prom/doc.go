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
// Rules of use:
//   - Several streams may share a name: their counters add up, connected
//     counts those connected, and the commit age is that of the most recent
//     commit of any of them. A name per stream suits a few long-lived
//     streams; a shared name (the resource, the tenant) suits thousands of
//     short-lived ones, whose series would otherwise crowd the server.
//   - Call the detach function once the stream is done (Run returned, or the
//     watcher's Done channel closed): the stream stops counting as attached
//     (a Run that returned already stopped counting as connected, through
//     the OnStop hook), and when the last stream of a name
//     detaches, the name's series are dropped, so that ten thousand
//     short-lived names leave nothing behind. A name attached again later
//     starts its counters from zero, which Prometheus' rate and increase
//     read as a counter reset.
//   - The per-event path (OnCommit) adds one atomic increment to a counter
//     of the stream's own: no lock, no clock, no allocation, and no
//     contention between streams of the same name. A scrape adds up the
//     counters of a name's streams; everything else happens once per
//     connection.
//   - The commit age is computed at scrape time, without reading the clock
//     per event: each scrape compares the name's commit count with the one
//     it saw last and remembers when it last changed. A commit is therefore
//     noticed at the first scrape after it, so the age reads low by at most
//     the time between two scrapes (a commit right after a scrape reads as
//     age 0 at the next one). Before the first commit the age counts from
//     the name's first attach. Alert on it with a threshold well above the
//     scrape interval, and together with resumable_connected: a stream that
//     is connected and quiet for long is stalled (or has nothing to say;
//     bookmarks and progress-only events count as commits).
//
// [OwnerHook] counts the ownership changes of a group member (etcd.Group's
// owner hook) under a "member" label: resumable_owned_streams{member},
// resumable_handoffs_total{member} and resumable_owner_losses_total{member}.
//
// A nil *Collector counts nothing: [Hooks] then returns empty hooks.
package prom
