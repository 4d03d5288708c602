package interop_test

import (
	"errors"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
)

// errCut is what a cut connection's writer sees.
var errCut = errors.New("interop: connection cut by the test")

// cuttingListener gives every accepted connection a random budget of bytes
// it may write (response headers and chunk framing included); the write
// that exceeds it sends only what fits and closes the connection, so that
// cuts fall anywhere: in the headers, between events, inside one.
type cuttingListener struct {
	net.Listener

	mu        sync.Mutex
	rng       *rand.Rand
	maxBudget int
	uncut     int // one connection in uncut is never cut (0: all are)
}

func (l *cuttingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.uncut > 0 && l.rng.IntN(l.uncut) == 0 {
		return c, nil
	}
	return &cuttingConn{Conn: c, budget: l.rng.IntN(l.maxBudget)}, nil
}

type cuttingConn struct {
	net.Conn

	mu     sync.Mutex
	budget int
	cut    bool
}

func (c *cuttingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return 0, errCut
	}
	if len(p) <= c.budget {
		c.budget -= len(p)
		return c.Conn.Write(p)
	}
	n, _ := c.Conn.Write(p[:c.budget])
	c.cut = true
	_ = c.Conn.Close()
	return n, errCut
}

// cuttingServer starts h behind a cuttingListener seeded with seed.
func cuttingServer(h http.Handler, seed uint64, maxBudget, uncut int) *httptest.Server {
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the servers complain about the cut connections
	ts.Listener = &cuttingListener{
		Listener:  ts.Listener,
		rng:       rand.New(rand.NewPCG(seed, 0)),
		maxBudget: maxBudget,
		uncut:     uncut,
	}
	ts.Start()
	return ts
}
