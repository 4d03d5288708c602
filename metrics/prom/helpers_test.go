package prom_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/metrics/prom"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// event is the event type of the tests' streams.
type event = streamtest.Event[string]

// bookmark is the value of a progress-only event.
const bookmark = "bm"

// extract takes an event's cursor; a bookmark is progress-only.
func extract(e event) (int64, error) {
	if e.Value == bookmark {
		return e.Seq, cursor.ProgressOnly
	}
	return e.Seq, nil
}

// newCollector returns a Collector in the namespace "resumable", or in ns
// when one is given.
func newCollector(t *testing.T, ns ...string) *prom.Collector {
	t.Helper()
	c, err := prom.NewCollector(append(ns, "resumable")[0])
	if err != nil {
		t.Fatalf("NewCollector() = %v", err)
	}
	return c
}

// values gathers c through a pedantic registry (which checks that what is
// collected matches what is described) and returns every sample by series:
// `events_total{name="a"}`, without the namespace. A histogram gives its
// count, as `reconnect_delay_seconds_count{name="a"}`.
func values(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("Register() = %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	got := make(map[string]float64)
	for _, mf := range mfs {
		name := strings.TrimPrefix(mf.GetName(), "resumable_")
		for _, m := range mf.GetMetric() {
			var v float64
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				name, v = strings.TrimPrefix(mf.GetName(), "resumable_")+"_count", float64(m.GetHistogram().GetSampleCount())
			}
			got[name+labels(m)] = v
		}
	}
	return got
}

// labels formats a metric's labels as {k="v",...}, sorted.
func labels(m *dto.Metric) string {
	var ls []string
	for _, l := range m.GetLabel() {
		ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(ls)
	return "{" + strings.Join(ls, ",") + "}"
}

// flakyStore is a memory Store whose Save fails once for one cursor.
type flakyStore struct {
	*cursor.Memory[int64]
	mu     sync.Mutex
	failAt int64 // 0: never
}

var errSave = errors.New("test: save failed")

func (s *flakyStore) Save(ctx context.Context, c int64) error {
	s.mu.Lock()
	fail := c == s.failAt
	if fail {
		s.failAt = 0
	}
	s.mu.Unlock()
	if fail {
		return errSave
	}
	return s.Memory.Save(ctx, c)
}
