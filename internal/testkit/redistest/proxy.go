package redistest

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of a Server that loses replies on demand:
// a request reaches the server and runs there, and its connection is
// closed before the reply reaches the client, as when a network or a
// server's output buffer fails at the wrong moment. It serves until the
// test ends. Its methods are safe for concurrent use.
type Proxy struct {
	// Addr is the proxy's host:port on 127.0.0.1: give it to the client
	// under test.
	Addr string

	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool
	cuts  []*cut
	over  int // replies longer than this are cut; 0: none
	overN int // how many were
}

// cut is one armed CutReply.
type cut struct {
	parts [][]byte
	fired chan struct{}
}

// NewProxy starts a proxy in front of s for t, closed when t ends.
func NewProxy(t testing.TB, s *Server) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: s.Addr, ln: ln, conns: map[net.Conn]bool{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// CutReply arms the proxy: the next request whose bytes contain every one
// of parts (compared without regard to case: go-redis writes command
// names in lower case) is passed to the server, and its connection is
// closed before any of the reply comes back. The returned channel is
// closed once that happened.
func (p *Proxy) CutReply(parts ...string) <-chan struct{} {
	c := &cut{fired: make(chan struct{})}
	for _, s := range parts {
		c.parts = append(c.parts, bytes.ToLower([]byte(s)))
	}
	p.mu.Lock()
	p.cuts = append(p.cuts, c)
	p.mu.Unlock()
	return c.fired
}

// CutRepliesOver makes the proxy close every connection whose reply to
// one request grows beyond n bytes, as a reply that outlasts the client's
// read timeout; 0 turns it off.
func (p *Proxy) CutRepliesOver(n int) {
	p.mu.Lock()
	p.over = n
	p.mu.Unlock()
}

// CutOver returns how many replies were cut for being over the size set
// with CutRepliesOver.
func (p *Proxy) CutOver() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.overN
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = true, true
		p.mu.Unlock()
		pc := &proxyConn{p: p, client: c, server: s}
		p.wg.Go(pc.requests)
		p.wg.Go(pc.replies)
	}
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// proxyConn is one client connection and its server connection.
type proxyConn struct {
	p              *Proxy
	client, server net.Conn

	mu      sync.Mutex
	cutting *cut // the request whose reply is to be cut
	replied int  // bytes of reply since the last request
}

// requests copies the client's requests to the server, noting the one
// whose reply is to be cut.
func (pc *proxyConn) requests() {
	defer pc.end()
	buf := make([]byte, 64<<10)
	for {
		n, err := pc.client.Read(buf)
		if n > 0 {
			pc.mu.Lock()
			pc.replied = 0
			if c := pc.p.take(buf[:n]); c != nil {
				pc.cutting = c
			}
			pc.mu.Unlock()
			if _, werr := pc.server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// replies copies the server's replies to the client, closing both when a
// reply is to be cut.
func (pc *proxyConn) replies() {
	defer pc.end()
	buf := make([]byte, 64<<10)
	for {
		n, err := pc.server.Read(buf)
		if n > 0 {
			pc.mu.Lock()
			c := pc.cutting
			pc.replied += n
			over := pc.p.isOver(pc.replied)
			pc.mu.Unlock()
			if c != nil {
				pc.end()
				close(c.fired)
				return
			}
			if over {
				pc.end()
				return
			}
			if _, werr := pc.client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// take returns the armed cut that req matches, disarming it.
func (p *Proxy) take(req []byte) *cut {
	lower := bytes.ToLower(req)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.cuts {
		match := true
		for _, part := range c.parts {
			match = match && bytes.Contains(lower, part)
		}
		if match {
			p.cuts = append(p.cuts[:i], p.cuts[i+1:]...)
			return c
		}
	}
	return nil
}

// isOver reports whether a reply of n bytes is to be cut, counting it.
func (p *Proxy) isOver(n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.over > 0 && n > p.over {
		p.overN++
		return true
	}
	return false
}

// end closes both connections. It may be called more than once.
func (pc *proxyConn) end() {
	_ = pc.client.Close()
	_ = pc.server.Close()
	pc.p.mu.Lock()
	delete(pc.p.conns, pc.client)
	delete(pc.p.conns, pc.server)
	pc.p.mu.Unlock()
}
