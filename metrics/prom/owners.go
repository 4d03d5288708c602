package prom

import "github.com/prometheus/client_golang/prometheus"

// OwnerHook returns the function that counts, under the member's name, the
// ownership changes of a group member (etcd.Group: call it from the hook of
// etcd.WithOwnerHook with the event's Member, Owned and Err). owned is true
// when the member starts owning a stream; false when it stops, with err nil
// for a handoff and non-nil for a loss. It feeds resumable_owned_streams,
// resumable_handoffs_total and resumable_owner_losses_total, labelled
// "member"; a member's series stay once it reported. The function is safe
// for concurrent use. A nil c counts nothing.
func OwnerHook(c *Collector) func(member string, owned bool, err error) {
	if c == nil {
		return func(string, bool, error) {}
	}
	return func(member string, owned bool, err error) {
		member = labelValue(member)
		c.mu.Lock()
		defer c.mu.Unlock()
		o := c.owners[member]
		switch {
		case owned:
			o.owned++
		case err != nil:
			o.owned--
			o.losses++
		default:
			o.owned--
			o.handoffs++
		}
		c.owners[member] = o
	}
}

// ownerCounts is what OwnerHook counted of one member, guarded by
// Collector.mu.
type ownerCounts struct {
	owned            int64
	handoffs, losses uint64
}

// ownerSample is what a scrape reads of a member.
type ownerSample struct {
	member string
	ownerCounts
}

// collectOwners sends the owner series of samples.
func (c *Collector) collectOwners(ch chan<- prometheus.Metric, samples []ownerSample) {
	for _, o := range samples {
		ch <- prometheus.MustNewConstMetric(c.owned, prometheus.GaugeValue, float64(o.owned), o.member)
		ch <- prometheus.MustNewConstMetric(c.handoffs, prometheus.CounterValue, float64(o.handoffs), o.member)
		ch <- prometheus.MustNewConstMetric(c.losses, prometheus.CounterValue, float64(o.losses), o.member)
	}
}
