package etcd_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/adapters/etcd/internal/etcdtest"
	"github.com/resumable-go/resumable/stream"
)

// server is the embedded etcd every test of the package shares; each test
// works under a prefix of its own.
var server *etcdtest.Server

func TestMain(m *testing.M) {
	s, err := etcdtest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	server = s
	code := m.Run()
	s.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// deadline bounds every wait of these tests; it guards against a hang and
// is never a timing assertion.
const deadline = 30 * time.Second

var prefixes atomic.Int64

// newPrefix returns a key prefix no other test uses.
func newPrefix(t *testing.T) string {
	t.Helper()
	return "/test/" + strconv.FormatInt(prefixes.Add(1), 10) + "/"
}

// newClient returns a client of the shared server, closed when t ends.
func newClient(t *testing.T) *clientv3.Client {
	t.Helper()
	c, err := server.Client()
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ctxFor returns a context bounded by deadline and ended with t.
func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// put writes key=value and returns the revision.
func put(t *testing.T, c *clientv3.Client, key, value string) int64 {
	t.Helper()
	resp, err := c.Put(ctxFor(t), key, value)
	if err != nil {
		t.Fatalf("Put(%s) = %v", key, err)
	}
	return resp.Header.Revision
}

// txnPut writes the keys in one transaction and returns its revision.
func txnPut(t *testing.T, c *clientv3.Client, keys ...string) int64 {
	t.Helper()
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpPut(k, "v-"+k)
	}
	resp, err := c.Txn(ctxFor(t)).Then(ops...).Commit()
	if err != nil {
		t.Fatalf("Txn() = %v", err)
	}
	return resp.Header.Revision
}

// newSource returns etcd.NewSource(w, prefix), failing tb on an error.
func newSource(tb testing.TB, w clientv3.Watcher, prefix string) stream.Source[etcd.Event, etcd.Cursor] {
	tb.Helper()
	src, err := etcd.NewSource(w, prefix)
	if err != nil {
		tb.Fatalf("NewSource() = %v", err)
	}
	return src
}
