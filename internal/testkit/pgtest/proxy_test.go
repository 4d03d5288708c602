package pgtest_test

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

// CutAfter: the first connection that sends the match gets the budget's
// bytes of the reply and then its end; the next gets the reply whole.
func TestProxyCutAfter(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reply := bytes.Repeat([]byte("r"), 100_000)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer l.Close()
	wg.Add(1)
	go func() { // a server that answers "GO" with the reply
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				buf := make([]byte, 2)
				if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "GO" {
					return
				}
				_, _ = c.Write(reply)
			}()
		}
	}()
	p := pgtest.NewProxy(t, l.Addr().String())
	p.CutAfter("GO", 1234)
	addr := p.DSN(l.Addr().String(), l.Addr().String())
	read := func() int {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("GO")); err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(io.LimitReader(c, int64(len(reply))))
		return len(got)
	}
	if n := read(); n != 1234 {
		t.Errorf("the first connection read %d bytes, want 1234", n)
	}
	if n := read(); n != len(reply) {
		t.Errorf("the second connection read %d bytes, want %d", n, len(reply))
	}
	if n := p.CutsAfter(); n != 1 {
		t.Errorf("CutsAfter() = %d, want 1", n)
	}
}
