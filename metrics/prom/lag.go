package prom

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Lag is one partition's position as its consumer reports it, for
// [NewLagCollector]: kafka.Group.Partitions gives one per assigned
// partition (HighWatermark, Committed, InFlight + Queued).
type Lag struct {
	Topic     string
	Partition int32
	// End is the offset after the partition's last record (Kafka's high
	// watermark); Committed is the offset the consumer committed, the next
	// it will handle. Either is -1 while unknown.
	End, Committed int64
	// InFlight counts the records the consumer holds and has not
	// committed.
	InFlight int
}

// NewLagCollector returns a prometheus.Collector that calls read at each
// scrape and reports each partition read returns, labelled member, topic
// and partition: resumable_partition_lag (End − Committed, at least 0;
// left out while either is unknown), resumable_partition_end_offset and
// resumable_partition_committed_offset (left out while unknown), and
// resumable_partition_in_flight. Register one per group member; read must
// be safe to call from any goroutine. A nil read reports nothing.
func NewLagCollector(member string, read func() []Lag) prometheus.Collector {
	labels := []string{"member", "topic", "partition"}
	return &lagCollector{
		member: strings.ToValidUTF8(member, "\uFFFD"),
		read:   read,
		lag: prometheus.NewDesc("resumable_partition_lag",
			"Records of the partition past the consumer's committed offset: its end offset minus the committed one.", labels, nil),
		end:       prometheus.NewDesc("resumable_partition_end_offset", "The offset after the partition's last record (high watermark).", labels, nil),
		committed: prometheus.NewDesc("resumable_partition_committed_offset", "The consumer's committed offset of the partition.", labels, nil),
		inFlight:  prometheus.NewDesc("resumable_partition_in_flight", "Records of the partition the consumer holds and has not committed.", labels, nil),
	}
}

// lagCollector is NewLagCollector's collector.
type lagCollector struct {
	member                        string
	read                          func() []Lag
	lag, end, committed, inFlight *prometheus.Desc
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lag
	ch <- c.end
	ch <- c.committed
	ch <- c.inFlight
}

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	if c.read == nil {
		return
	}
	for _, l := range c.read() {
		labels := []string{c.member, strings.ToValidUTF8(l.Topic, "\uFFFD"), strconv.Itoa(int(l.Partition))}
		if l.End >= 0 {
			ch <- prometheus.MustNewConstMetric(c.end, prometheus.GaugeValue, float64(l.End), labels...)
		}
		if l.Committed >= 0 {
			ch <- prometheus.MustNewConstMetric(c.committed, prometheus.GaugeValue, float64(l.Committed), labels...)
		}
		if l.End >= 0 && l.Committed >= 0 {
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(max(0, l.End-l.Committed)), labels...)
		}
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(l.InFlight), labels...)
	}
}
