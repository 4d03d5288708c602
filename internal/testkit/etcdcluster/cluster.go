// Package etcdcluster runs a real etcd cluster of separate processes (the
// etcd binary that scripts/testenv.sh builds from the Go module proxy) for
// the integration tests of the etcd adapter, lets a test kill, restart,
// wipe and restore its members, and cuts connections with a TCP [Proxy].
// It returns plain data (endpoints, member IDs) and imports nothing of
// etcd, so that no module requiring internal/testkit has etcd in its module
// graph; adapters/etcd makes clients of the endpoints
// (adapters/etcd/internal/cluster). The adapter's unit tests run etcd's
// embed server instead, a library and not a process, which stays in
// adapters/etcd (adapters/etcd/internal/etcdtest).
//
// Rules of use:
//   - Tests opt in with RESUMABLE_ETCD_INTEGRATION=1 ([EnvIntegration]), so
//     that they run apart from the unit tests (one package at a time, as
//     .ci/run does); without it [Skip] skips, naming the command.
//   - The rule of every test server of internal/testkit: CI never skips.
//     Without the etcd binary, [Skip] fails the test when CI is set and
//     skips it otherwise, naming the one command that builds it
//     (testbin.BuildCommand, bash scripts/testenv.sh build).
//   - The binary is looked for in $RESUMABLE_TESTENV_BIN, else where
//     scripts/testenv.sh builds it (package testbin).
//   - Every member is in its own process group; the test's cleanup kills
//     what still runs, failed or not, and on Linux a member dies with the
//     test binary. Logs go to files in the test's temporary directory and
//     their tails are printed when the test failed.
//   - Members are asked about over HTTP only (/health, and the JSON gateway's
//     /v3/maintenance/status for IDs and the leader).
//   - A Cluster belongs to the test that started it: call its methods from
//     that test's goroutine, except Endpoints and Endpoint.
package etcdcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

	"github.com/resumable-go/resumable/internal/testkit/childproc"
	"github.com/resumable-go/resumable/internal/testkit/testbin"
)

// Environment variables read by the package.
const (
	// EnvIntegration opts in to the integration tests when set to "1".
	EnvIntegration = "RESUMABLE_ETCD_INTEGRATION"
	// EnvBin names the directory holding the etcd and etcdutl binaries.
	EnvBin = testbin.EnvBin
)

// ProgressInterval is the members' watch progress notification interval.
const ProgressInterval = time.Second

// Timeout bounds every wait of the harness (a member's start, a leader's
// election); it guards against a hang and is never a timing assertion.
const Timeout = time.Minute

// runCommand is the one command that builds the binary and runs the tests
// against it, named when the tests are not opted in.
const runCommand = "RESUMABLE_ETCD_INTEGRATION=1 RESUMABLE_TESTENV_BIN=$(" + testbin.BuildCommand + ") go test -race -count=1 -p 1 ./internal/testkit/etcdcluster/ ./adapters/etcd/internal/cluster/ ./adapters/etcd/integration/"

// Skip skips t, naming the command that runs these tests, unless the integration tests are
// switched on; then, without the etcd binary, it fails t when CI is set (CI
// never skips) and skips it otherwise, naming the command that builds the
// binary. It returns the binary's path.
func Skip(t testing.TB) string {
	t.Helper()
	if os.Getenv(EnvIntegration) != "1" {
		t.Skipf("etcdcluster: integration test against a real etcd cluster, run apart: %s", runCommand)
	}
	return filepath.Join(testbin.Require(t, "etcd"), "etcd")
}

// Cluster is a running etcd cluster for one test.
type Cluster struct {
	bin     string
	dir     string
	initial string // --initial-cluster
	members []*member
	http    *http.Client // no keep-alives: nothing lingers after a call
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
	if n < 1 {
		t.Fatalf("etcdcluster: Start: n = %d: must be at least 1", n)
	}
	c := &Cluster{bin: bin, dir: t.TempDir(), http: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	ports, err := childproc.FreePorts(2 * n)
	if err != nil {
		t.Fatalf("%v", err)
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

// Dir returns the test's temporary directory, where the logs are.
func (c *Cluster) Dir() string { return c.dir }

// Status is what a member says of itself and its cluster.
type Status struct {
	ClusterID, MemberID uint64
	// Leader is the member ID of the leader the member knows, 0 for none.
	Leader uint64
	// Revision is the store's current revision.
	Revision int64
}

// Status asks member i, which must be running, for its [Status]; it fails
// t when the member does not answer.
func (c *Cluster) Status(t testing.TB, i int) Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	st, err := c.status(ctx, i)
	if err != nil {
		t.Fatalf("etcdcluster: status of %s: %v", c.members[i].name, err)
	}
	return st
}

// status asks member i's JSON gateway, which encodes 64-bit numbers as
// strings.
func (c *Cluster) status(ctx context.Context, i int) (Status, error) {
	var out struct {
		Header struct {
			ClusterID uint64 `json:"cluster_id,string"`
			MemberID  uint64 `json:"member_id,string"`
			Revision  int64  `json:"revision,string"`
		} `json:"header"`
		Leader uint64 `json:"leader,string"`
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, clientURL(c.members[i].client)+"/v3/maintenance/status", strings.NewReader("{}"))
	if err != nil {
		return Status{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Status{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return Status{}, fmt.Errorf("%s: %s", resp.Status, body)
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&out); err != nil {
		return Status{}, fmt.Errorf("%v: %s", err, body)
	}
	if out.Header.MemberID == 0 {
		return Status{}, fmt.Errorf("no member ID: %s", body)
	}
	return Status{ClusterID: out.Header.ClusterID, MemberID: out.Header.MemberID, Leader: out.Leader, Revision: out.Header.Revision}, nil
}

// Leader returns the index of the member that is the leader now, asking
// every running member until one names a member of the cluster; it fails t
// when none does within [Timeout].
func (c *Cluster) Leader(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for i, m := range c.members {
			if m.proc == nil {
				continue
			}
			st, err := c.status(ctx, i)
			if err != nil || st.Leader == 0 {
				continue
			}
			for j, o := range c.members {
				if o.id == st.Leader && o.proc != nil {
					return j
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("etcdcluster: no leader within %v", Timeout)
		case <-tick.C:
		}
	}
}

// Kill kills member i at once (SIGKILL), as a crash would.
func (c *Cluster) Kill(t testing.TB, i int) {
	t.Helper()
	m := c.members[i]
	if m.proc == nil {
		t.Fatalf("etcdcluster: Kill(%d): not running", i)
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
		t.Fatalf("etcdcluster: Restart(%d): still running", i)
	}
	c.startMember(t, i)
	c.awaitHealthy(t, i)
}

// Wipe deletes the data directory of member i, which must not be running.
func (c *Cluster) Wipe(t testing.TB, i int) {
	t.Helper()
	if c.members[i].proc != nil {
		t.Fatalf("etcdcluster: Wipe(%d): still running", i)
	}
	if err := os.RemoveAll(c.dataDir(i)); err != nil {
		t.Fatalf("etcdcluster: Wipe(%d): %v", i, err)
	}
}

// Restore replaces the data of member i, which must not be running, with
// snapshot, restored by etcdutl snapshot restore with the member's own
// flags (name, peer URL, cluster and token), as an operator restoring a
// backup in place would: the cluster keeps its ID. Without an etcdutl
// binary next to the etcd one it skips t, or fails it when CI is set.
// Start the member with [Cluster.Restart].
func (c *Cluster) Restore(t testing.TB, i int, snapshot string) {
	t.Helper()
	bin := filepath.Join(testbin.Require(t, "etcdutl"), "etcdutl")
	c.Wipe(t, i)
	m := c.members[i]
	cmd := exec.Command(bin, "snapshot", "restore", snapshot,
		"--data-dir="+c.dataDir(i),
		"--name="+m.name,
		"--initial-cluster="+c.initial,
		"--initial-cluster-token="+clusterToken,
		"--initial-advertise-peer-urls="+peerURL(m.peer))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("etcdcluster: etcdutl snapshot restore: %v\n%s", err, out)
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
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if exited, err := m.proc.Exited(); exited {
			t.Fatalf("etcdcluster: %s exited: %v\n%s", m.name, err, c.tails())
		}
		if last = c.healthy(ctx, i); last == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("etcdcluster: %s not healthy within %v: %v\n%s", m.name, Timeout, last, c.tails())
		case <-m.proc.Done():
		case <-tick.C:
		}
	}
	st, err := c.status(ctx, i)
	if err != nil {
		t.Fatalf("etcdcluster: status of %s: %v", m.name, err)
	}
	m.id = st.MemberID
}

// healthy returns nil once member i says it is healthy (it has a leader).
func (c *Cluster) healthy(ctx context.Context, i int) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL(c.members[i].client)+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return errors.New(resp.Status + ": " + string(body))
	}
	return nil
}

func (c *Cluster) cleanup(t testing.TB) {
	for _, m := range c.members {
		if m.proc != nil {
			m.proc.Kill()
			m.proc = nil
		}
	}
	if t.Failed() {
		t.Logf("etcdcluster: logs in %s\n%s", c.dir, c.tails())
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
