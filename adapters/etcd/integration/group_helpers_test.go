package integration_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd/internal/hrw"
)

// ownerOf returns the member whose owner key holds stream, or "".
func ownerOf(t *testing.T, c *clientv3.Client, stream string) string {
	t.Helper()
	resp, err := c.Get(ctxFor(t), "/resumable/owners/"+stream)
	if err != nil {
		t.Fatalf("Get(owner key) = %v", err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// awaitPicks waits until every stream is owned by the member rendezvous
// hashing picks among members, and returns stream → owner.
func awaitPicks(t *testing.T, c *clientv3.Client, streams, members []string) map[string]string {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		got := map[string]string{}
		ok := true
		for _, s := range streams {
			want, _ := hrw.Pick(s, members)
			got[s] = ownerOf(t, c, s)
			ok = ok && got[s] == want
		}
		if ok {
			return got
		}
		if time.Now().After(end) {
			t.Fatalf("owners = %v, want the rendezvous picks among %v", got, members)
		}
		time.Sleep(pollInterval)
	}
}
