// Package redistest starts real Redis servers for the tests of the redis
// adapter and its example: Debian's redis-server, on a free port of
// 127.0.0.1 only, with no persistence (no RDB snapshots, no AOF), its
// working directory a temporary one.
//
// A test takes a server of its own with [Start]; it is killed when the
// test ends. [Server.Restart] kills it and starts it again on the same
// port: without persistence that is a server that lost every key, as after
// a crash or a FLUSHALL.
//
// A test of a program that starts its own server (examples/redis's demo)
// takes the binary with [Require].
//
// The rule of every server of internal/testkit: when the binary is
// missing, Start and Require skip the test naming the one command that installs it
// ([InstallCommand]), unless the environment variable CI is set: then they
// fail it (CI never skips; .ci/run installs the server). The binary is
// looked for in $RESUMABLE_REDIS_SERVER, else /usr/bin/redis-server, else
// on $PATH ([Bin]). Nothing here sleeps for a fixed time: readiness is
// polled with a deadline.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/resumable-go/resumable/internal/testkit/childproc"
)

// EnvBin names the redis-server binary to run; the default is DefaultBin.
const EnvBin = "RESUMABLE_REDIS_SERVER"

// DefaultBin is where Debian's redis-server package installs the server.
const DefaultBin = "/usr/bin/redis-server"

// InstallCommand is the one command that installs the server (Debian's
// and Ubuntu's package), named when it is missing.
const InstallCommand = "apt-get install redis-server"

// ErrNoBinary is matched by the error [Bin] returns when no redis-server
// binary is found.
var ErrNoBinary = errors.New("redistest: redis-server not found")

// Bin returns the redis-server binary to run: $RESUMABLE_REDIS_SERVER when
// set, else DefaultBin, else redis-server on $PATH. It returns an error
// matching [ErrNoBinary] when there is none.
func Bin() (string, error) {
	if bin := os.Getenv(EnvBin); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v", ErrNoBinary, EnvBin, bin, err)
		}
		return bin, nil
	}
	if _, err := os.Stat(DefaultBin); err == nil {
		return DefaultBin, nil
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("%w: not at %s nor on $PATH", ErrNoBinary, DefaultBin)
	}
	return bin, nil
}

// Timeout bounds every wait of the harness; it guards against a hang and
// is never a timing assertion.
const Timeout = 30 * time.Second

// Server is one redis-server child process. Its methods are safe for
// concurrent use.
type Server struct {
	// Addr is the server's host:port on 127.0.0.1.
	Addr string

	bin, dir string
	port     int
	mu       sync.Mutex
	proc     *childproc.Proc
	starts   int
}

// Require returns the redis-server binary ([Bin]) for a test that runs
// the server itself (a program under test that starts its own). When
// there is none it skips t naming [InstallCommand], or fails t when the
// environment variable CI is set.
func Require(t testing.TB) string {
	t.Helper()
	bin, err := Bin()
	if err != nil {
		childproc.Missing(t, fmt.Sprintf("%v; install it with: %s", err, InstallCommand))
	}
	return bin
}

// Start starts a server for t, killed when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Require(t)
	ports, err := childproc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{bin: bin, dir: t.TempDir(), port: ports[0]}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

func (s *Server) start() error {
	s.starts++
	log := filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.starts))
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--daemonize", "no", "--protected-mode", "yes"}
	p, err := childproc.Start("redis-server", s.bin, args, log, log)
	if err != nil {
		return err
	}
	s.proc = p
	end := time.Now().Add(Timeout)
	for {
		if err := ping(s.Addr); err == nil {
			return nil
		} else if time.Now().After(end) {
			p.Kill()
			return fmt.Errorf("redistest: server on %s not ready after %v: %v\n%s", s.Addr, Timeout, err, childproc.Tail(log, 20))
		}
		if done, _ := p.Exited(); done {
			return fmt.Errorf("redistest: server on %s exited:\n%s", s.Addr, childproc.Tail(log, 20))
		}
		time.Sleep(10 * time.Millisecond) // polling readiness, bounded by Timeout
	}
}

// ping sends PING on a fresh connection and wants +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Restart kills the server and starts it again on the same port, empty.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.Kill()
	return s.start()
}

// Kill kills the server. It may be called more than once.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		_, _ = s.proc.Stop(syscall.SIGKILL, Timeout)
	}
}

// Pause stops the server (SIGSTOP): it keeps its connections and answers
// nothing until Resume, as a server stalled by the machine.
func (s *Server) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.proc.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return s.proc.AwaitStopped(Timeout)
}

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.Signal(syscall.SIGCONT)
}
