package prom

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// Collector is a prometheus.Collector of the metrics of the streams attached
// to it with [Hooks]. Make one with [NewCollector] and register it once. Its
// methods are safe for concurrent use.
type Collector struct {
	events, progress, opens, cleanEnds, failures *prometheus.Desc
	resyncs, saves, saveErrors                   *prometheus.Desc
	connected, streams, commitAge                *prometheus.Desc
	handlerRetries, parked, inFlight             *prometheus.Desc
	delays                                       *prometheus.HistogramVec
	owned, handoffs, losses                      *prometheus.Desc
	commitLag, retained, walStatus               *prometheus.Desc
	failoverReady                                *prometheus.Desc

	mu     sync.Mutex
	groups map[string]*group
	owners map[string]ownerCounts // member → what OwnerHook counted
	repl   map[string]Replication // name → what ReplicationHook last recorded
}

// group is the metrics of one name, guarded by Collector.mu. Each stream
// counts on counters of its own (so that streams sharing a name never
// contend on a cache line); a scrape adds them up, with the totals of the
// streams already detached.
type group struct {
	delay   prometheus.Observer
	members map[*member]struct{}
	retired totals    // of the detached members
	seen    uint64    // commits at the last scrape
	since   time.Time // when seen last changed, or when the group was made
}

// totals is a snapshot of counters.
type totals struct {
	events, progress, opens, cleanEnds uint64
	resyncs, saves, saveErrors         uint64
	retried, failed, expired           uint64
	retries, parked                    uint64
}

func (t *totals) add(o totals) {
	t.events += o.events
	t.progress += o.progress
	t.opens += o.opens
	t.cleanEnds += o.cleanEnds
	t.resyncs += o.resyncs
	t.saves += o.saves
	t.saveErrors += o.saveErrors
	t.retried += o.retried
	t.failed += o.failed
	t.expired += o.expired
	t.retries += o.retries
	t.parked += o.parked
}

// namespaceRE is what a metric name prefix may be.
var namespaceRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// delayBuckets are the bounds, in seconds, of the reconnect delay
// histogram; the 0 bucket counts the reopens that waited nothing (after a
// clean end).
var delayBuckets = []float64{0, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// NewCollector returns a Collector whose metric names are namespace + "_" +
// the name ("" means no prefix). A namespace that is not a valid metric name
// prefix gives an error matching [stream.ErrInvalidOption].
func NewCollector(namespace string) (*Collector, error) {
	if namespace != "" && !namespaceRE.MatchString(namespace) {
		return nil, fmt.Errorf("prom: NewCollector(%q): not a valid metric name prefix: %w", namespace, stream.ErrInvalidOption)
	}
	name := func(n string) string { return prometheus.BuildFQName(namespace, "", n) }
	desc := func(n, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name(n), help, append([]string{"name"}, labels...), nil)
	}
	return &Collector{
		events:         desc("events_total", "Events handled and committed, a completed resync's replay included."),
		progress:       desc("progress_events_total", "Progress-only events committed (bookmarks, heartbeats)."),
		opens:          desc("opens_total", "Connections opened."),
		cleanEnds:      desc("clean_ends_total", "Connections that ended without a failure (io.EOF from the server)."),
		failures:       desc("failures_total", "Failures of Open, Recv or the Store, by the classifier's verdict.", "action"),
		resyncs:        desc("resyncs_total", "Resyncs completed after an expired cursor."),
		saves:          desc("saves_total", "Cursor Store saves that succeeded."),
		saveErrors:     desc("save_errors_total", "Cursor Store saves that failed."),
		connected:      desc("connected", "Streams with an open connection."),
		handlerRetries: desc("handler_retries_total", "Handler calls retried in place (WithHandlerRetry)."),
		parked:         desc("parked_total", "Events handed to the dead letter and committed (WithDeadLetter)."),
		inFlight:       desc("in_flight_events", "Events read but not yet committed, as of each stream's last commit (WithConcurrency)."),
		streams:        desc("streams", "Streams attached and not detached."),
		commitAge: desc("last_commit_age_seconds",
			"Seconds since a cursor was last committed, as seen by scrapes: low by at most the time between two scrapes."),
		delays: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    name("reconnect_delay_seconds"),
			Help:    "Wait before each reopen of a connection.",
			Buckets: delayBuckets,
		}, []string{"name"}),
		owned:     prometheus.NewDesc(name("owned_streams"), "Streams the group member owns.", []string{"member"}, nil),
		handoffs:  prometheus.NewDesc(name("handoffs_total"), "Ownerships of the group member ended by a handoff.", []string{"member"}, nil),
		losses:    prometheus.NewDesc(name("owner_losses_total"), "Ownerships of the group member lost: its lease expired, or it was fenced out.", []string{"member"}, nil),
		commitLag: desc("replication_commit_lag_seconds", "Seconds between the commit of the change the Store holds and the last health report (ReplicationHook)."),
		retained:  desc("replication_retained_wal_bytes", "WAL the server keeps for the stream's replication slot."),
		walStatus: desc("replication_wal_status", "1 for the slot's wal_status (reserved, extended, unreserved, lost), 0 for the others.", "status"),
		failoverReady: desc("replication_failover_ready",
			"1 when a promoted standby would go on from the stream's cursor: a failover slot synced on every standby."),
		groups: make(map[string]*group),
		owners: make(map[string]ownerCounts),
	}, nil
}

// Describe sends the descriptors of every metric the Collector can export.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.events, c.progress, c.opens, c.cleanEnds, c.failures, c.resyncs,
		c.saves, c.saveErrors, c.connected, c.streams, c.commitAge,
		c.handlerRetries, c.parked, c.inFlight,
		c.owned, c.handoffs, c.losses,
		c.commitLag, c.retained, c.walStatus, c.failoverReady,
	} {
		ch <- d
	}
	c.delays.Describe(ch)
}

// sample is what a scrape reads of a group.
type sample struct {
	name string
	totals
	connected, streams int
	inFlight           int64
	age                time.Duration
}

// Collect sends the current value of every series. It reads the clock once.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	c.mu.Lock()
	samples := make([]sample, 0, len(c.groups))
	for name, g := range c.groups {
		s := sample{name: name, totals: g.retired, streams: len(g.members)}
		for m := range g.members {
			s.add(m.load())
			if m.state.Load() == connected {
				s.connected++
			}
			s.inFlight += m.inFlight.Load()
		}
		if n := s.events + s.progress; n != g.seen {
			g.seen, g.since = n, now
		}
		s.age = now.Sub(g.since)
		samples = append(samples, s)
	}
	owners := make([]ownerSample, 0, len(c.owners))
	for member, o := range c.owners {
		owners = append(owners, ownerSample{member, o})
	}
	repl := make([]replSample, 0, len(c.repl))
	for name, r := range c.repl {
		repl = append(repl, replSample{name, r})
	}
	c.mu.Unlock()
	c.collectOwners(ch, owners)
	c.collectReplication(ch, repl)
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, s := range samples {
		counter(c.events, s.events, s.name)
		counter(c.progress, s.progress, s.name)
		counter(c.opens, s.opens, s.name)
		counter(c.cleanEnds, s.cleanEnds, s.name)
		counter(c.failures, s.retried, s.name, errclass.Retry.String())
		counter(c.failures, s.failed, s.name, errclass.Fail.String())
		counter(c.failures, s.expired, s.name, errclass.Expired.String())
		counter(c.resyncs, s.resyncs, s.name)
		counter(c.saves, s.saves, s.name)
		counter(c.saveErrors, s.saveErrors, s.name)
		gauge(c.connected, float64(s.connected), s.name)
		gauge(c.streams, float64(s.streams), s.name)
		gauge(c.commitAge, s.age.Seconds(), s.name)
		counter(c.handlerRetries, s.retries, s.name)
		counter(c.parked, s.parked, s.name)
		gauge(c.inFlight, float64(s.inFlight), s.name)
	}
	c.delays.Collect(ch)
}

// attach returns a new member of the group of name, made if needed.
func (c *Collector) attach(name string) *member {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[name]
	if g == nil {
		g = &group{delay: c.delays.WithLabelValues(name), members: make(map[*member]struct{}), since: time.Now()}
		c.groups[name] = g
	}
	m := &member{name: name, g: g, delay: g.delay}
	g.members[m] = struct{}{}
	return m
}

// detach ends m's membership of its group, keeping its counts in the
// group's totals, and drops the group's series when m was the last member.
// Only the first call counts.
func (c *Collector) detach(m *member) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.state.Swap(detached) == detached {
		return
	}
	g := m.g
	g.retired.add(m.load())
	delete(g.members, m)
	if len(g.members) == 0 && c.groups[m.name] == g {
		delete(c.groups, m.name)
		c.delays.DeleteLabelValues(m.name)
	}
}

// labelValue makes name a valid label value: invalid UTF-8 is replaced.
func labelValue(name string) string {
	return strings.ToValidUTF8(name, "\uFFFD")
}
