// Package etcdtest starts a real etcd server inside a test binary
// (go.etcd.io/etcd/server/v3/embed): one member, no fsync, on free loopback
// ports, with progress notifications every 100 ms. It is what the unit
// tests of the etcd adapter run against; the multi-process integration
// tests use the etcd binary instead (internal/testkit/etcdcluster, with
// clients from package cluster). It stays in adapters/etcd, not in
// internal/testkit: the server is a library linked into the test binary
// (it needs no binary, so it never skips), and importing it from the kit
// would put etcd in the module graph of every module requiring the kit.
package etcdtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/resumable-go/resumable/internal/testkit/childproc"
)

// ProgressInterval is the server's progress notification interval (the
// smallest etcd allows).
const ProgressInterval = 100 * time.Millisecond

// Server is a running embedded etcd.
type Server struct {
	etcd *embed.Etcd
	dir  string
	url  string
}

// Start starts a server in a new temporary directory and waits until it is
// ready.
func Start() (*Server, error) {
	dir, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		return nil, err
	}
	ports, err := childproc.FreePorts(2)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = true
	cfg.WatchProgressNotifyInterval = ProgressInterval
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("etcdtest: start: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("etcdtest: start: %w", err)
	case <-time.After(time.Minute):
		e.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("etcdtest: not ready within a minute")
	}
	return &Server{etcd: e, dir: dir, url: client.String()}, nil
}

// Endpoint returns the client URL.
func (s *Server) Endpoint() string { return s.url }

// Client returns a new client of the server; the caller closes it.
func (s *Server) Client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{s.url},
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// Compact compacts the history up to rev.
func (s *Server) Compact(ctx context.Context, c *clientv3.Client, rev int64) error {
	_, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical())
	return err
}

// Close stops the server and removes its directory.
func (s *Server) Close() {
	s.etcd.Close()
	os.RemoveAll(s.dir)
}
