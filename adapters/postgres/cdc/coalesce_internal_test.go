//go:build linux

package cdc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection, the first
// read through a coalescingConn.
func tcpPair(t *testing.T) (*coalescingConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	c := newCoalescing(nc)
	if c == nil {
		t.Fatal("newCoalescing(a TCP connection) = nil, want a coalescingConn")
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c, peer
}

func TestNewCoalescingOnlyOnSockets(t *testing.T) {
	a, b := net.Pipe() // as a TLS connection, it is no syscall.Conn
	defer a.Close()
	defer b.Close()
	if c := newCoalescing(a); c != nil {
		t.Errorf("newCoalescing(net.Pipe) = %v, want nil", c)
	}
}

// A busy read takes what the socket holds, and one that finds it empty
// pauses, then waits in the poller for bytes written at any time.
func TestCoalescingBusyRead(t *testing.T) {
	c, peer := tcpPair(t)
	buf := make([]byte, 64)

	if _, err := peer.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	c.busy = true
	n, err := io.ReadAtLeast(c, buf, 3)
	if err != nil || string(buf[:n]) != "abc" {
		t.Fatalf("Read() = %q, %v, want abc", buf[:n], err)
	}

	c.busy = true // nothing written: the pause finds nothing
	written := make(chan error, 1)
	go func() {
		runtime.Gosched()
		_, err := peer.Write([]byte("def"))
		written <- err
	}()
	n, err = io.ReadAtLeast(c, buf, 3)
	if err != nil || string(buf[:n]) != "def" {
		t.Fatalf("Read() = %q, %v, want def", buf[:n], err)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
}

// The read deadline bounds a busy read's pause and its wait.
func TestCoalescingDeadline(t *testing.T) {
	c, _ := tcpPair(t)
	buf := make([]byte, 8)
	for _, at := range []time.Time{time.Unix(1, 0), time.Now().Add(20 * time.Millisecond)} {
		if err := c.SetReadDeadline(at); err != nil {
			t.Fatal(err)
		}
		c.busy = true
		n, err := c.Read(buf)
		if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Read() with deadline %v = %d, %v, want %v", at, n, err, os.ErrDeadlineExceeded)
		}
	}
	// A passed deadline times the read out even with bytes waiting, as the
	// socket's own Read does: under a flood of messages the status
	// interval's deadline still fires.
	c2, peer := tcpPair(t)
	if _, err := peer.Write([]byte("waiting")); err != nil {
		t.Fatal(err)
	}
	if err := c2.SetReadDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	c2.busy = true
	n, err := c2.Read(buf)
	var ne net.Error
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("Read() with bytes waiting and a passed deadline = %d, %v, want a timeout (%v)", n, err, os.ErrDeadlineExceeded)
	}
	// SetDeadline counts too, and the zero time clears it.
	if err := c.SetDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if got := c.deadline.Load(); got != time.Unix(1, 0).UnixNano() {
		t.Errorf("deadline after SetDeadline = %d, want %d", got, time.Unix(1, 0).UnixNano())
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := c.deadline.Load(); got != 0 {
		t.Errorf("deadline after SetDeadline(zero) = %d, want 0", got)
	}
}

// A busy read of a connection the peer closed returns io.EOF; a closed
// connection's read fails.
func TestCoalescingEnds(t *testing.T) {
	c, peer := tcpPair(t)
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	peer.Close()
	buf := make([]byte, 8)
	c.busy = true
	if n, err := c.Read(buf); n != 1 || err != nil {
		t.Fatalf("Read() = %d, %v, want 1, nil", n, err)
	}
	c.busy = true
	if n, err := c.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("Read() after the peer closed = %d, %v, want 0, EOF", n, err)
	}

	c2, _ := tcpPair(t)
	c2.Close()
	c2.busy = true
	if _, err := c2.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read() of a closed connection = %v, want %v", err, net.ErrClosed)
	}
}

// Bytes written in chunks of every size, while reads go busy and quiet,
// arrive whole and in order.
func TestCoalescingStream(t *testing.T) {
	c, peer := tcpPair(t)
	var want bytes.Buffer
	for i := range 3000 {
		want.Write(bytes.Repeat([]byte{byte(i)}, 1+i%97))
	}
	written := make(chan error, 1)
	go func() {
		defer peer.Close()
		b := want.Bytes()
		for i := 0; len(b) > 0; i++ {
			n := min(len(b), 1+i%251)
			if _, err := peer.Write(b[:n]); err != nil {
				written <- err
				return
			}
			b = b[n:]
			if i%50 == 0 {
				runtime.Gosched()
			}
		}
		written <- nil
	}()
	got, err := io.ReadAll(readerOf{c, 300})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("read %d bytes, want the %d written, in order", len(got), want.Len())
	}
}

// readerOf reads r at most max bytes at a time, as a small buffer does.
type readerOf struct {
	r   io.Reader
	max int
}

func (r readerOf) Read(p []byte) (int, error) { return r.r.Read(p[:min(len(p), r.max)]) }
