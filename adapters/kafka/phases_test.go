package kafka_test

import (
	"fmt"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A pass of BenchmarkSerial reaches these marks in this order; a phase is
// the time from one mark to the next.
const (
	markStart     = iota // the pass began (before the Group or client is made)
	markCreated          // the client exists (kgo's OnNewClient)
	markJoined           // the group's assignment arrived (the SyncGroup response)
	markFetched          // the first fetched batch was read (OnFetchBatchRead)
	markDecoded          // the last batch read before the first record was handled
	markFirst            // the first record was handled
	markLast             // the last record was handled
	markCommitted        // the final commit's response arrived (the last OffsetCommit)
	markLeft             // the LeaveGroup response arrived
	markClosed           // the pass returned: the client closed, Run returned
	marks
)

// phaseNames names the phase that ends at each mark.
var phaseNames = [marks]string{"", "create", "join", "first-fetch", "decode", "hand-over", "read", "final-commit", "leave", "close"}

// timeline is when one pass reached each mark, seen through kgo's hooks
// (the same on both sides of BenchmarkSerial) and the handler, and the
// requests the pass's client made: each is counted in the phase in which
// its response arrived.
type timeline struct {
	mu   sync.Mutex
	at   [marks]time.Time
	cpu  [marks]time.Duration // the process's CPU time at each mark (the cluster's share included)
	reqs []request
	gc   [2]gcTotals // at the start and at the close
	// decoded counts the records in the batches read before the first
	// record was handled.
	decoded int
}

// gcTotals are the process's garbage collections so far and the CPU
// time they took.
type gcTotals struct {
	cycles uint64
	cpu    float64 // seconds
	live   uint64  // the heap marked live by the last collection, bytes
}

func readGC() gcTotals {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return gcTotals{cycles: s[0].Value.Uint64(), cpu: s[1].Value.Float64(), live: s[2].Value.Uint64()}
}

type request struct {
	at  time.Time
	key int16
}

func newTimeline() *timeline {
	t := &timeline{}
	t.gc[0] = readGC()
	t.at[markStart], t.cpu[markStart] = time.Now(), processCPU()
	return t
}

// mark notes that the pass reached m now.
func (t *timeline) mark(m int) {
	if m == markClosed {
		t.gc[1] = readGC()
	}
	t.mu.Lock()
	t.markLocked(m, time.Now())
	t.mu.Unlock()
}

// markLocked notes that the pass reached m at now: the first time, but
// for the marks that note the last such event.
func (t *timeline) markLocked(m int, now time.Time) {
	switch {
	case m == markDecoded && !t.at[markFirst].IsZero():
	case t.at[m].IsZero() || m == markDecoded || m == markCommitted || m == markLeft:
		t.at[m], t.cpu[m] = now, processCPU()
	}
}

// handled notes the i-th record of n handled, and reports whether it was
// the last.
func (t *timeline) handled(i, n int) bool {
	switch i {
	case 1:
		t.mark(markFirst)
	case n:
		t.mark(markLast)
		return true
	}
	return false
}

func (t *timeline) OnNewClient(*kgo.Client) { t.mark(markCreated) }

func (t *timeline) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	now := time.Now()
	t.mu.Lock()
	if t.at[markFirst].IsZero() {
		t.decoded += m.NumRecords
	}
	t.markLocked(markFetched, now)
	t.markLocked(markDecoded, now)
	t.mu.Unlock()
}

func (t *timeline) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, _ kgo.BrokerE2E) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	switch key {
	case kmsg.SyncGroup.Int16():
		t.markLocked(markJoined, now)
	case kmsg.OffsetCommit.Int16():
		t.markLocked(markCommitted, now)
	case kmsg.LeaveGroup.Int16():
		t.markLocked(markLeft, now)
	}
	t.reqs = append(t.reqs, request{at: now, key: key})
}

// phases returns the length of each phase (index: the mark that ends it)
// and the CPU time the process spent in it; a mark not reached (no commit)
// takes the time of the one before it.
func (t *timeline) phases() (wall, cpu [marks]time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, prevCPU := t.at[markStart], t.cpu[markStart]
	for m := markCreated; m < marks; m++ {
		at, c := t.at[m], t.cpu[m]
		if at.IsZero() || at.Before(prev) {
			at, c = prev, prevCPU
		}
		wall[m], cpu[m], prev, prevCPU = at.Sub(prev), c-prevCPU, at, c
	}
	return wall, cpu
}

// processCPU returns the CPU time the process used so far.
func processCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		panic(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// requests counts the requests whose response arrived in each phase, by
// the request's name.
func (t *timeline) requests() [marks]map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	var counts [marks]map[string]int
	for m := range counts {
		counts[m] = map[string]int{}
	}
	for _, r := range t.reqs {
		m := markCreated
		for m < markClosed && (t.at[m].IsZero() || r.at.After(t.at[m])) {
			m++
		}
		counts[m][kmsg.NameForKey(r.key)]++
	}
	return counts
}

// sides collects the timelines of BenchmarkSerial's two loops, round by
// round, and summarises them.
type sides struct {
	names [2]string
	tls   [2][]*timeline
}

func (s *sides) add(i int, t *timeline) { s.tls[i] = append(s.tls[i], t) }

// table returns, per phase, each side's median length over the rounds
// (ms) and the requests of the phase per pass (their mean count), then the
// median of the whole pass.
func (s *sides) table() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "median per phase over %d rounds, ms (requests per pass, by response)\n", len(s.tls[0]))
	fmt.Fprintf(&sb, "%-13s %9s %9s  %9s %9s  %s\n", "phase", s.names[0], s.names[1], "cpu ours", "cpu hand",
		"requests: "+s.names[0]+" | "+s.names[1])
	var totals, gcs, gcCPU, decoded, live [2][]float64
	var phases, cpus [2][marks][]float64
	var reqs [2][marks]map[string]int
	for i := range s.tls {
		for m := range reqs[i] {
			reqs[i][m] = map[string]int{}
		}
		for _, t := range s.tls[i] {
			d, cpu := t.phases()
			var total time.Duration
			for m := markCreated; m < marks; m++ {
				phases[i][m] = append(phases[i][m], ms(d[m]))
				cpus[i][m] = append(cpus[i][m], ms(cpu[m]))
				total += d[m]
			}
			totals[i] = append(totals[i], ms(total))
			decoded[i] = append(decoded[i], float64(t.decoded))
			live[i] = append(live[i], float64(t.gc[0].live)/(1<<20))
			gcs[i] = append(gcs[i], float64(t.gc[1].cycles-t.gc[0].cycles))
			gcCPU[i] = append(gcCPU[i], 1000*(t.gc[1].cpu-t.gc[0].cpu))
			for m, c := range t.requests() {
				for k, v := range c {
					reqs[i][m][k] += v
				}
			}
		}
	}
	for m := markCreated; m < marks; m++ {
		fmt.Fprintf(&sb, "%-13s %9.2f %9.2f  %9.2f %9.2f  %s | %s\n", phaseNames[m], median(phases[0][m]), median(phases[1][m]),
			median(cpus[0][m]), median(cpus[1][m]), perPass(reqs[0][m], len(s.tls[0])), perPass(reqs[1][m], len(s.tls[1])))
	}
	fmt.Fprintf(&sb, "%-13s %9.2f %9.2f\n", "pass", median(totals[0]), median(totals[1]))
	fmt.Fprintf(&sb, "%-13s %9.0f %9.0f\n", "decoded", median(decoded[0]), median(decoded[1]))
	fmt.Fprintf(&sb, "%-13s %9.1f %9.1f\n", "gc cycles", median(gcs[0]), median(gcs[1]))
	fmt.Fprintf(&sb, "%-13s %9.1f %9.1f\n", "live MiB", median(live[0]), median(live[1]))
	fmt.Fprintf(&sb, "%-13s %9.2f %9.2f\n", "gc cpu ms", median(gcCPU[0]), median(gcCPU[1]))
	return sb.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// perPass shows counts of requests by name divided by the passes.
func perPass(c map[string]int, passes int) string {
	names := make([]string, 0, len(c))
	for k := range c {
		names = append(names, k)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %.1f", k, float64(c[k])/float64(passes))
	}
	return strings.Join(parts, " ")
}
