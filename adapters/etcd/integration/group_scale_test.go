package integration_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/adapters/etcd/internal/cluster"
	"github.com/resumable-go/resumable/adapters/etcd/internal/hrw"
)

// envScale turns TestGroupScale on.
const envScale = "RESUMABLE_ETCD_SCALE"

// TestGroupScale measures a Group of 5 members sharing 10,000 streams on a
// 3-member cluster: how long until every stream runs where rendezvous
// hashing puts it, how long a dead member's share takes to move, and what
// the members ask of etcd once steady. It is a measurement, not part of the
// default run: set RESUMABLE_ETCD_SCALE=1 as well (and leave -race off).
func TestGroupScale(t *testing.T) {
	if os.Getenv(envScale) != "1" {
		t.Skipf("set %s=1 to measure a Group of 10,000 streams", envScale)
	}
	const nStreams, nMembers = 10000, 5
	c := cluster.Start(t, 3)
	streams := make([]string, nStreams)
	for i := range streams {
		streams[i] = fmt.Sprintf("tenant-%05d", i)
	}
	names := make([]string, nMembers)
	counts := newOwnedCounts()
	members := make([]*scaleMember, nMembers)
	atStart := etcdRequests(t, c)
	for i := range names {
		names[i] = fmt.Sprintf("m%d", i)
		members[i] = startScaleMember(t, c, names[i], streams, counts)
	}
	took := counts.await(t, expected(streams, names), 5*time.Minute)
	t.Logf("every stream owned by its pick %v after the members started; requests meanwhile: %s", took.Round(time.Millisecond), delta(atStart, etcdRequests(t, c)))

	before := etcdRequests(t, c)
	const window = 30 * time.Second
	time.Sleep(window) // a measurement window, not a synchronisation
	after := etcdRequests(t, c)
	t.Logf("steady, over %v: %s (gRPC messages received by every cluster member)", window, delta(before, after))
	for _, m := range []string{"Range", "Txn", "Put", "DeleteRange", "LeaseTimeToLive"} {
		if d := after[m] - before[m]; d > 0 {
			t.Errorf("steady: %v %s requests in %v, want none (no polling)", d, m, window)
		}
	}

	// The last member dies: its client closes, its lease is no longer kept
	// alive, and the others take its streams once the lease expired.
	before = etcdRequests(t, c)
	members[nMembers-1].client.Close()
	took = counts.await(t, expected(streams, names[:nMembers-1]), 5*time.Minute)
	t.Logf("a dead member's share moved %v after it died (lease TTL 10s, the default); requests: %s", took.Round(time.Millisecond), delta(before, etcdRequests(t, c)))

	// A member stops gracefully: its share moves at once.
	before = etcdRequests(t, c)
	stopped := time.Now()
	members[0].stop(t)
	counts.await(t, expected(streams, names[1:nMembers-1]), 5*time.Minute)
	t.Logf("a stopped member's share moved %v after its stop began; requests: %s", time.Since(stopped).Round(time.Millisecond), delta(before, etcdRequests(t, c)))
}

// expected returns how many streams rendezvous hashing gives each member.
func expected(streams, members []string) map[string]int {
	out := map[string]int{}
	for _, s := range streams {
		m, _ := hrw.Pick(s, members)
		out[m]++
	}
	return out
}

// ownedCounts counts, from the owner hooks, how many streams each member
// owns.
type ownedCounts struct {
	mu      sync.Mutex
	owned   map[string]int
	changed chan struct{}
}

func newOwnedCounts() *ownedCounts {
	return &ownedCounts{owned: map[string]int{}, changed: make(chan struct{})}
}

func (o *ownedCounts) hook(e etcd.OwnerEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e.Owned {
		o.owned[e.Member]++
	} else {
		o.owned[e.Member]--
	}
	close(o.changed)
	o.changed = make(chan struct{})
}

// await waits until the members own want (members absent from want own
// nothing) and returns how long it waited.
func (o *ownedCounts) await(t *testing.T, want map[string]int, limit time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	timeout := time.After(limit)
	for {
		o.mu.Lock()
		ok := true
		for m, n := range o.owned {
			ok = ok && n == want[m]
		}
		for m, n := range want {
			ok = ok && o.owned[m] == n
		}
		snapshot, changed := fmt.Sprint(o.owned), o.changed
		o.mu.Unlock()
		if ok {
			return time.Since(began)
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("owned %s, want %v", snapshot, want)
		}
	}
}

// delta formats the requests made between two readings, by method.
func delta(before, after map[string]float64) string {
	var lines []string
	for method, n := range after {
		if d := n - before[method]; d > 0 {
			lines = append(lines, fmt.Sprintf("%s %.0f", method, d))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, ", ")
}

// scaleMember is a Group member with a client of its own.
type scaleMember struct {
	client *clientv3.Client
	cancel context.CancelFunc
	done   chan error // closed once Run returned
}

func startScaleMember(t *testing.T, c *cluster.Cluster, name string, streams []string, counts *ownedCounts) *scaleMember {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := etcd.NewGroup(cl, name, etcd.WithOwnerHook(counts.hook))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &scaleMember{client: cl, cancel: cancel, done: make(chan error)}
	go func() {
		defer close(m.done)
		_ = g.Run(ctx, streams, func(ctx context.Context, o *etcd.Owner) error {
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	t.Cleanup(func() { m.stop(t); cl.Close() })
	return m
}

// stop ends the member's Run and waits for it; it may be called more than
// once.
func (m *scaleMember) stop(t *testing.T) {
	m.cancel()
	select {
	case <-m.done:
	case <-time.After(deadline):
		t.Error("Group.Run did not return")
	}
}

// etcdRequests returns the gRPC messages every cluster member received, by
// method (grpc_server_msg_received_total: a unary call is one, a stream
// counts each message sent on it).
func etcdRequests(t *testing.T, c *cluster.Cluster) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, ep := range c.Endpoints() {
		resp, err := http.Get("http://" + ep + "/metrics")
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "grpc_server_msg_received_total{") {
				continue
			}
			_, rest, _ := strings.Cut(line, `grpc_method="`)
			method, _, _ := strings.Cut(rest, `"`)
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			out[method] += v
		}
		resp.Body.Close()
	}
	return out
}
