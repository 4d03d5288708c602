// Package cluster runs a real etcd cluster of separate processes (the etcd
// binary that scripts/testenv.sh builds from the Go module proxy) for the
// integration tests of the etcd adapter, and lets a test kill, stop and
// restart its members.
//
// Rules of use:
//   - Tests opt in with RESUMABLE_ETCD_INTEGRATION=1 ([EnvIntegration]), so
//     that they run apart from the unit tests (one package at a time, as
//     .ci/run does); without it [Skip] skips, naming the command.
//   - The rule of every test server here: CI never skips. Without the etcd
//     binary, [Skip] fails the test when CI is set and skips it otherwise,
//     naming the one command that builds it.
//   - The binary is looked for in $RESUMABLE_TESTENV_BIN, else where
//     scripts/testenv.sh builds it ([BinDir]).
//   - Every process started (members, and the test's own through
//     childproc.Start) is in its own process group; the test's cleanup kills
//     what still runs, failed or not, and on Linux a child dies with the
//     test binary. Logs go to files in the test's temporary directory and
//     their tails are printed when the test failed.
//   - A Cluster belongs to the test that started it: call its methods from
//     that test's goroutine, except Endpoints and Client.
package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/resumable-go/resumable/internal/testkit/childproc"
)

// Environment variables read by the package.
const (
	// EnvIntegration opts in to the integration tests when set to "1".
	EnvIntegration = "RESUMABLE_ETCD_INTEGRATION"
	// EnvBin names the directory holding the etcd binary.
	EnvBin = childproc.EnvBin
)

// testenvDir is the directory scripts/testenv.sh builds into under its
// cache root (named after the Kubernetes release it pins).
const testenvDir = "k8s-v1.37.2"

// ProgressInterval is the members' watch progress notification interval.
const ProgressInterval = time.Second

const startTimeout = time.Minute

// BinDir returns the directory the etcd binary is looked for in.
func BinDir() string { return childproc.BinDir(testenvDir) }

// runCommand is the one command that builds the binary and runs the tests
// against it.
const runCommand = "RESUMABLE_ETCD_INTEGRATION=1 RESUMABLE_TESTENV_BIN=$(bash scripts/testenv.sh build) go test -race -count=1 -p 1 ./adapters/etcd/integration/"

// Skip skips t, naming the command that runs these tests, unless they are
// switched on; then, without the etcd binary, it fails t when CI is set (CI
// never skips) and skips it otherwise, naming the command that builds the
// binary. It returns the binary's path.
func Skip(t testing.TB) string {
	t.Helper()
	if os.Getenv(EnvIntegration) != "1" {
		t.Skipf("cluster: integration test against a real etcd cluster, run apart: %s", runCommand)
	}
	bin := filepath.Join(BinDir(), "etcd")
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		childproc.Missing(t, fmt.Sprintf("cluster: no etcd binary at %s: build it with: bash scripts/testenv.sh build (or set %s)", bin, EnvBin))
	}
	return bin
}

// Cluster is a running etcd cluster for one test.
type Cluster struct {
	bin     string
	dir     string
	initial string // --initial-cluster
	members []*member
}

type member struct {
	name         string
	client, peer int
	proc         *childproc.Proc
	id           uint64 // the member ID, learned at start
}

// Start starts an n-member cluster on free loopback ports in a temporary
// directory of t and waits until every member is healthy (there is a
// leader). It skips t as [Skip] does, and registers a cleanup that kills
// every member.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := Skip(t)
	c := &Cluster{bin: bin, dir: t.TempDir()}
	ports, err := childproc.FreePorts(2 * n)
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	var initial []string
	for i := range n {
		m := &member{name: "m" + strconv.Itoa(i), client: ports[2*i], peer: ports[2*i+1]}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+peerURL(m.peer))
	}
	c.initial = strings.Join(initial, ",")
	t.Cleanup(func() { c.cleanup(t) })
	for i := range c.members {
		c.startMember(t, i)
	}
	for i := range c.members {
		c.awaitHealthy(t, i)
	}
	return c
}

// Endpoints returns every member's client address, HOST:PORT.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i := range c.members {
		out[i] = c.Endpoint(i)
	}
	return out
}

// Endpoint returns member i's client address, HOST:PORT.
func (c *Cluster) Endpoint(i int) string {
	return "127.0.0.1:" + strconv.Itoa(c.members[i].client)
}

// Client returns a new client of the given endpoints (every member when
// none is given), closed when t ends.
func (c *Cluster) Client(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	if len(endpoints) == 0 {
		endpoints = c.Endpoints()
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("cluster: client: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// Dir returns the test's temporary directory, where the logs are.
func (c *Cluster) Dir() string { return c.dir }

// Leader returns the index of the member that is the leader now, asking
// every running member until one answers.
func (c *Cluster) Leader(t testing.TB) int {
	t.Helper()
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		for i, m := range c.members {
			if m.proc == nil {
				continue
			}
			st, err := cl.Status(ctx, c.Endpoint(i))
			if err != nil || st.Leader == 0 {
				continue
			}
			for j, o := range c.members {
				if o.id == st.Leader {
					return j
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("cluster: no leader within %v", startTimeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kill kills member i at once (SIGKILL), as a crash would.
func (c *Cluster) Kill(t testing.TB, i int) {
	t.Helper()
	m := c.members[i]
	if m.proc == nil {
		t.Fatalf("cluster: Kill(%d): not running", i)
	}
	m.proc.Kill()
	m.proc = nil
}

// Restart starts member i again on its ports and data, and waits until it
// is healthy. A member whose data was wiped ([Cluster.Wipe]) starts afresh
// with the flags it first started with: a one-member cluster comes back
// with the same cluster ID, at revision 1.
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	if c.members[i].proc != nil {
		t.Fatalf("cluster: Restart(%d): still running", i)
	}
	c.startMember(t, i)
	c.awaitHealthy(t, i)
}

// Wipe deletes the data directory of member i, which must not be running.
func (c *Cluster) Wipe(t testing.TB, i int) {
	t.Helper()
	if c.members[i].proc != nil {
		t.Fatalf("cluster: Wipe(%d): still running", i)
	}
	if err := os.RemoveAll(c.dataDir(i)); err != nil {
		t.Fatalf("cluster: Wipe(%d): %v", i, err)
	}
}

// Snapshot saves a snapshot of member i's data (as etcdctl snapshot save
// does) to a new file in the test's directory, and returns its path.
func (c *Cluster) Snapshot(t testing.TB, i int) string {
	t.Helper()
	cl := c.Client(t, c.Endpoint(i))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	resp, err := cl.SnapshotWithVersion(ctx)
	if err != nil {
		t.Fatalf("cluster: snapshot of %s: %v", c.members[i].name, err)
	}
	defer resp.Snapshot.Close()
	f, err := os.CreateTemp(c.dir, c.members[i].name+"-*.snapshot")
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Snapshot); err != nil {
		t.Fatalf("cluster: snapshot of %s: %v", c.members[i].name, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("cluster: %v", err)
	}
	return f.Name()
}

// Restore replaces the data of member i, which must not be running, with
// snapshot, restored by etcdutl snapshot restore with the member's own
// flags (name, peer URL, cluster and token), as an operator restoring a
// backup in place would: the cluster keeps its ID. It skips t when there
// is no etcdutl binary next to the etcd one (fails it when CI is set). Start the member with
// [Cluster.Restart].
func (c *Cluster) Restore(t testing.TB, i int, snapshot string) {
	t.Helper()
	bin := filepath.Join(BinDir(), "etcdutl")
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		childproc.Missing(t, fmt.Sprintf("cluster: no etcdutl binary at %s: build it with: bash scripts/testenv.sh build (or set %s)", bin, EnvBin))
	}
	c.Wipe(t, i)
	m := c.members[i]
	cmd := exec.Command(bin, "snapshot", "restore", snapshot,
		"--data-dir="+c.dataDir(i),
		"--name="+m.name,
		"--initial-cluster="+c.initial,
		"--initial-cluster-token="+clusterToken,
		"--initial-advertise-peer-urls="+peerURL(m.peer))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cluster: etcdutl snapshot restore: %v\n%s", err, out)
	}
}

// clusterToken is the members' --initial-cluster-token.
const clusterToken = "resumable-test"

func (c *Cluster) dataDir(i int) string { return filepath.Join(c.dir, c.members[i].name) }

func (c *Cluster) startMember(t testing.TB, i int) {
	t.Helper()
	m := c.members[i]
	args := []string{
		"--name=" + m.name,
		"--data-dir=" + c.dataDir(i),
		"--listen-client-urls=" + clientURL(m.client),
		"--advertise-client-urls=" + clientURL(m.client),
		"--listen-peer-urls=" + peerURL(m.peer),
		"--initial-advertise-peer-urls=" + peerURL(m.peer),
		"--unsafe-no-fsync=true",
		"--log-level=warn",
		"--watch-progress-notify-interval=" + ProgressInterval.String(),
		// Ignored once the data directory exists.
		"--initial-cluster=" + c.initial,
		"--initial-cluster-state=new",
		"--initial-cluster-token=" + clusterToken,
	}
	log := filepath.Join(c.dir, m.name+".log")
	p, err := childproc.Start(m.name, c.bin, args, log, log)
	if err != nil {
		t.Fatalf("%v", err)
	}
	m.proc = p
}

// awaitHealthy waits until member i answers /health with a leader, and
// records its member ID.
func (c *Cluster) awaitHealthy(t testing.TB, i int) {
	t.Helper()
	m := c.members[i]
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		if exited, err := m.proc.Exited(); exited {
			t.Fatalf("cluster: %s exited: %v\n%s", m.name, err, c.tails())
		}
		if healthy(ctx, hc, clientURL(m.client)+"/health") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("cluster: %s not healthy within %v\n%s", m.name, startTimeout, c.tails())
		case <-time.After(100 * time.Millisecond):
		}
	}
	cl := c.Client(t, c.Endpoint(i))
	st, err := cl.Status(ctx, c.Endpoint(i))
	if err != nil {
		t.Fatalf("cluster: status of %s: %v", m.name, err)
	}
	m.id = st.Header.MemberId
	cl.Close()
}

func healthy(ctx context.Context, hc *http.Client, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`)
}

func (c *Cluster) cleanup(t testing.TB) {
	for _, m := range c.members {
		if m.proc != nil {
			m.proc.Kill()
			m.proc = nil
		}
	}
	if t.Failed() {
		t.Logf("cluster: logs in %s\n%s", c.dir, c.tails())
	}
}

func (c *Cluster) tails() string {
	var b strings.Builder
	for _, m := range c.members {
		path := filepath.Join(c.dir, m.name+".log")
		fmt.Fprintf(&b, "---- tail of %s\n%s\n", path, childproc.Tail(path, 30))
	}
	return b.String()
}

func clientURL(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }
func peerURL(port int) string   { return "http://127.0.0.1:" + strconv.Itoa(port) }
