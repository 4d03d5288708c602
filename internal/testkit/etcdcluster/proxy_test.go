package etcdcluster_test

import (
	"bufio"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/resumable-go/resumable/internal/testkit/etcdcluster"
)

// echoServer answers every line on a connection with the same line, until
// its listener is closed; the cleanup waits for every goroutine.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// roundTrip sends a line on c and returns the answer, or the error that
// ended the read (bounded, so that a hang fails rather than blocks).
func roundTrip(c net.Conn, r *bufio.Reader, line string) (string, error) {
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

// TestProxyCut: through the proxy bytes pass; Cut ends the open connection
// and refuses new ones; after Restore a new connection passes again.
func TestProxyCut(t *testing.T) {
	p, err := etcdcluster.NewProxy(echoServer(t))
	if err != nil {
		t.Fatalf("NewProxy() = %v", err)
	}
	defer p.Close()
	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatalf("dial the proxy: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}

	c, r := dial()
	if got, err := roundTrip(c, r, "before"); err != nil || got != "before\n" {
		t.Fatalf("through the proxy: %q, %v; want before", got, err)
	}
	p.Cut()
	if got, err := r.ReadString('\n'); err == nil {
		t.Errorf("after Cut the open connection read %q, want it ended", got)
	}
	c2, r2 := dial() // the listener still accepts, then closes
	if got, err := roundTrip(c2, r2, "cut"); err == nil {
		t.Errorf("a connection made while cut answered %q, want it refused", got)
	}
	p.Restore()
	c3, r3 := dial()
	if got, err := roundTrip(c3, r3, "after"); err != nil || got != "after\n" {
		t.Errorf("after Restore: %q, %v; want after", got, err)
	}
}
