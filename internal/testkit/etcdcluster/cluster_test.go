package etcdcluster_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/resumable-go/resumable/internal/testkit/etcdcluster"
)

// put writes key=value through the JSON gateway of the member at endpoint.
func put(t *testing.T, endpoint, key, value string) {
	t.Helper()
	body := fmt.Sprintf(`{"key":%q,"value":%q}`,
		base64.StdEncoding.EncodeToString([]byte(key)), base64.StdEncoding.EncodeToString([]byte(value)))
	ctx, cancel := context.WithTimeout(context.Background(), etcdcluster.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+endpoint+"/v3/kv/put", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("put %s: %s: %s", key, resp.Status, b)
	}
}

// TestMembers: three members of one cluster, each with its own ID; after
// the leader is killed another is elected, and the killed member comes
// back as itself.
func TestMembers(t *testing.T) {
	c := etcdcluster.Start(t, 3)
	if got := len(c.Endpoints()); got != 3 {
		t.Fatalf("Endpoints() has %d, want 3", got)
	}
	ids := map[uint64]int{}
	var cluster uint64
	for i := range 3 {
		st := c.Status(t, i)
		if i == 0 {
			cluster = st.ClusterID
		}
		if st.ClusterID != cluster || st.ClusterID == 0 {
			t.Errorf("member %d: cluster ID %x, want %x as member 0", i, st.ClusterID, cluster)
		}
		ids[st.MemberID] = i
	}
	if len(ids) != 3 {
		t.Fatalf("member IDs %v, want 3 distinct", ids)
	}

	leader := c.Leader(t)
	c.Kill(t, leader)
	next := c.Leader(t)
	if next == leader {
		t.Fatalf("Leader() after Kill(%d) = %d, want another member", leader, next)
	}
	c.Restart(t, leader)
	if st := c.Status(t, leader); ids[st.MemberID] != leader || st.ClusterID != cluster {
		t.Errorf("member %d restarted as ID %x of cluster %x, want itself in %x", leader, st.MemberID, st.ClusterID, cluster)
	}
}

// TestWipe: a one-member cluster whose data was wiped comes back with the
// same cluster ID at revision 1, as Restart's doc says.
func TestWipe(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	put(t, c.Endpoint(0), "k", "v")
	before := c.Status(t, 0)
	if before.Revision < 2 {
		t.Fatalf("revision after a put = %d, want at least 2", before.Revision)
	}
	c.Kill(t, 0)
	c.Wipe(t, 0)
	c.Restart(t, 0)
	after := c.Status(t, 0)
	if after.ClusterID != before.ClusterID || after.Revision != 1 {
		t.Errorf("after Wipe: cluster %x at revision %d, want %x at revision 1", after.ClusterID, after.Revision, before.ClusterID)
	}
}
