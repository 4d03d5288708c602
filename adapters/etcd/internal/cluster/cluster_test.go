package cluster_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/adapters/etcd/internal/cluster"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestClientAndSnapshot: a client of Client reads what another member's
// client wrote, and a Snapshot of a member restores into a member that
// then holds the write. The process-level harness is tested in
// internal/testkit/etcdcluster.
func TestClientAndSnapshot(t *testing.T) {
	c := cluster.Start(t, 1)
	ctx := t.Context()
	if _, err := c.Client(t).Put(ctx, "k", "v"); err != nil {
		t.Fatalf("Put() = %v", err)
	}
	snap := c.Snapshot(t, 0)
	if _, err := c.Client(t, c.Endpoint(0)).Put(ctx, "k", "after the snapshot"); err != nil {
		t.Fatalf("Put() = %v", err)
	}
	c.Kill(t, 0)
	c.Restore(t, 0, snap)
	c.Restart(t, 0)
	resp, err := c.Client(t, c.Endpoint(0)).Get(ctx, "k")
	if err != nil {
		t.Fatalf("Get() after restore = %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Errorf("Get(k) after restore = %v, want v (the snapshot's)", resp.Kvs)
	}
}
