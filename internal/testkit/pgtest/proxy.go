package pgtest

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a server, and breaks one on cue: see
// [Proxy.Cut] and [Proxy.Stall].
type Proxy struct {
	l      net.Listener
	target string
	armed  atomic.Pointer[trap]
	fired  chan struct{} // closed when a trap fired
	once   sync.Once
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn

	// CutAfter's: the message that starts a budget, the budgets left, and
	// the cuts made.
	budgetMatch []byte
	budgets     []int
	cuts        atomic.Int32
}

// trap is what the next client message holding match sets off.
type trap struct {
	match []byte
	stall bool // hold the replies back; else drop the connection at the reply
}

// NewProxy starts a proxy to target (host:port), closed when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{l: l, target: target, fired: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Cut makes the proxy pass the next client message holding match (any
// message for an empty string) to the server, read the server's reply,
// and close the connection without passing the reply on: the statement
// ran, and the client cannot know it.
func (p *Proxy) Cut(match string) { p.armed.Store(&trap{match: []byte(match)}) }

// Stall makes the proxy pass the next client message holding match to the
// server and from then on pass nothing more of that connection's replies,
// keeping it open: a server that hangs mid-reply.
func (p *Proxy) Stall(match string) { p.armed.Store(&trap{match: []byte(match), stall: true}) }

// CutAfter makes the proxy close, partway through, the connections whose
// client sends a message holding match: the i-th such connection is
// closed after budgets[i] bytes of the server's replies that follow that
// message (as a network that fails mid-message does); those after the
// last budget pass whole. Call it before the connections are made.
func (p *Proxy) CutAfter(match string, budgets ...int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budgetMatch, p.budgets = []byte(match), budgets
}

// CutsAfter returns how many connections CutAfter's budgets cut.
func (p *Proxy) CutsAfter() int { return int(p.cuts.Load()) }

// budget returns the next of CutAfter's budgets for a client message b
// holding its match, or -1.
func (p *Proxy) budget(b []byte) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.budgets) == 0 || !bytes.Contains(b, p.budgetMatch) {
		return -1
	}
	n := p.budgets[0]
	p.budgets = p.budgets[1:]
	return n
}

// Fired is closed when a Cut or a Stall took effect.
func (p *Proxy) Fired() <-chan struct{} { return p.fired }

// DSN returns dsn, a URL whose host is host, with the proxy in its place.
func (p *Proxy) DSN(dsn, host string) string {
	return strings.Replace(dsn, host, "127.0.0.1:"+strconv.Itoa(p.l.Addr().(*net.TCPAddr).Port), 1)
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		var set atomic.Pointer[trap] // the trap this connection set off
		left := make(chan int, 1)    // the reply bytes CutAfter lets pass
		p.wg.Add(2)
		go func() { // client → server
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			budgeted := false
			for {
				n, err := client.Read(buf)
				if n > 0 {
					if tr := p.armed.Load(); tr != nil && bytes.Contains(buf[:n], tr.match) && p.armed.CompareAndSwap(tr, nil) {
						set.Store(tr)
					}
					if b := p.budget(buf[:n]); !budgeted && b >= 0 {
						budgeted = true
						left <- b // before the message reaches the server, so before its replies
					}
					if _, werr := server.Write(buf[:n]); werr != nil {
						err = werr
					}
				}
				if err != nil {
					server.Close()
					return
				}
			}
		}()
		go func() { // server → client
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			budget := -1
			for {
				n, err := server.Read(buf)
				if budget < 0 { // taken after the read: the budget was set before the message went out
					select {
					case budget = <-left:
					default:
					}
				}
				if n > 0 && budget >= 0 {
					if n >= budget {
						_, _ = client.Write(buf[:budget])
						p.cuts.Add(1)
						client.Close()
						server.Close()
						return
					}
					budget -= n
				}
				if tr := set.Load(); n > 0 && tr != nil {
					p.once.Do(func() { close(p.fired) }) // before the client can see it
					if tr.stall {
						return // reads no more: the server's writes back up, the client waits
					}
					client.Close()
					server.Close()
					return
				}
				if n > 0 {
					if _, werr := client.Write(buf[:n]); werr != nil {
						err = werr
					}
				}
				if err != nil {
					client.Close()
					return
				}
			}
		}()
	}
}

// close closes the listener and every connection, and waits for the
// forwarding goroutines.
func (p *Proxy) close() {
	p.l.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
