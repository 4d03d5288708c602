package redistest_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// do sends one command and returns the first line of the answer.
func do(t *testing.T, addr string, args ...string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(line)
}

// TestRestartLosesKeys: a restarted server listens on the same address
// and holds nothing (no persistence).
func TestRestartLosesKeys(t *testing.T) {
	srv := redistest.Start(t)
	if !strings.HasPrefix(srv.Addr, "127.0.0.1:") {
		t.Errorf("Addr = %s, want a loopback address", srv.Addr)
	}
	if got := do(t, srv.Addr, "SET", "k", "v"); got != "+OK" {
		t.Fatalf("SET = %q", got)
	}
	if got := do(t, srv.Addr, "EXISTS", "k"); got != ":1" {
		t.Fatalf("EXISTS before the restart = %q, want :1", got)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := do(t, srv.Addr, "EXISTS", "k"); got != ":0" {
		t.Errorf("EXISTS after the restart = %q, want :0", got)
	}
}
