// Package cluster gives the etcd adapter's integration tests a real etcd
// cluster of separate processes with clients: it is the few lines that
// turn the harness of internal/testkit/etcdcluster (which starts, kills,
// restarts, wipes and restores the members and returns endpoints,
// importing nothing of etcd) into clientv3 clients and snapshots.
//
// The rules of use are etcdcluster's: tests opt in with
// RESUMABLE_ETCD_INTEGRATION=1; without the etcd binary [Skip] skips
// naming bash scripts/testenv.sh build, or fails when CI is set (CI never
// skips). [Cluster] has every method of etcdcluster.Cluster (Kill,
// Restart, Leader, Restore, …) and adds [Cluster.Client] and
// [Cluster.Snapshot].
package cluster

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/resumable-go/resumable/internal/testkit/etcdcluster"
)

// Cluster is a running etcd cluster for one test (an etcdcluster.Cluster)
// that makes clients of its members.
type Cluster struct {
	*etcdcluster.Cluster
}

// Proxy is a TCP proxy that can cut connections (etcdcluster.Proxy).
type Proxy = etcdcluster.Proxy

// NewProxy starts a proxy to target (etcdcluster.NewProxy).
func NewProxy(target string) (*Proxy, error) { return etcdcluster.NewProxy(target) }

// Skip skips or fails t as etcdcluster.Skip does, and returns the etcd
// binary's path.
func Skip(t testing.TB) string {
	t.Helper()
	return etcdcluster.Skip(t)
}

// Start starts an n-member cluster for t as etcdcluster.Start does.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return &Cluster{etcdcluster.Start(t, n)}
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

// Snapshot saves a snapshot of member i's data (as etcdctl snapshot save
// does) to a new file in the test's directory, and returns its path; give
// it to [etcdcluster.Cluster.Restore].
func (c *Cluster) Snapshot(t testing.TB, i int) string {
	t.Helper()
	cl := c.Client(t, c.Endpoint(i))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), etcdcluster.Timeout)
	defer cancel()
	resp, err := cl.SnapshotWithVersion(ctx)
	if err != nil {
		t.Fatalf("cluster: snapshot of member %d: %v", i, err)
	}
	defer resp.Snapshot.Close()
	f, err := os.CreateTemp(c.Dir(), "snapshot-*")
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Snapshot); err != nil {
		t.Fatalf("cluster: snapshot of member %d: %v", i, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("cluster: %v", err)
	}
	return f.Name()
}
