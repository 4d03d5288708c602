// Package childproc runs the real servers and programs that integration
// tests start as child processes: each in its own process group, its output
// in files, killed with the test binary; the directory the servers'
// binaries are built into by scripts/testenv.sh; and free loopback ports to
// start them on. The Kubernetes, etcd and PostgreSQL harnesses share it.
package childproc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	// EnvBin names the directory holding the binaries the integration tests
	// run (kube-apiserver, etcd).
	EnvBin = "RESUMABLE_TESTENV_BIN"
	// EnvCache names the cache root that scripts/testenv.sh builds into
	// (default $HOME/.cache/resumable/testenv); used when EnvBin is unset.
	EnvCache = "RESUMABLE_TESTENV_CACHE"
)

// BinDir returns the directory the binaries are looked for in: $EnvBin if
// set, else $EnvCache/name, with $EnvCache defaulting to
// $HOME/.cache/resumable/testenv as in scripts/testenv.sh (name is the
// directory it builds into, k8s-<version>).
func BinDir(name string) string {
	if dir := os.Getenv(EnvBin); dir != "" {
		return dir
	}
	cache := os.Getenv(EnvCache)
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		cache = filepath.Join(home, ".cache", "resumable", "testenv")
	}
	return filepath.Join(cache, name)
}

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1 a
// moment ago: it holds a listener on each until all n are found, then
// closes them. Another process could take one before the caller listens on
// it, which is unlikely on a test machine.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("childproc: free port: %w", err)
		}
		ls = append(ls, l)
		addr, ok := l.Addr().(*net.TCPAddr)
		if !ok {
			return nil, fmt.Errorf("childproc: free port: %v is not a TCP address", l.Addr())
		}
		ports = append(ports, addr.Port)
	}
	return ports, nil
}

// Proc is one run of a child process in its own process group, with its
// stdout and stderr in files.
type Proc struct {
	Name string
	// Stdout and Stderr are the paths of the files the process writes.
	Stdout, Stderr string

	cmd  *exec.Cmd
	done chan struct{} // closed once Wait returned
	err  error         // Wait's result, read after done is closed
}

// Start starts bin with args. Its stdout and stderr are appended to
// stdout and stderr (the same path for both is allowed). Its stdout goes
// through a pipe, copied to the file by this process: a write of up to
// PIPE_BUF bytes to a pipe is never cut, while one to a file that crosses a
// page boundary can be cut by SIGKILL, leaving half a line. On Linux the
// process is killed if the test binary dies.
func Start(name, bin string, args []string, stdout, stderr string) (*Proc, error) {
	open := func(path string) (*os.File, error) {
		return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	}
	out, err := open(stdout)
	if err != nil {
		return nil, fmt.Errorf("childproc: %s: %w", name, err)
	}
	files := []*os.File{out} // closed once the process ended and its output was copied
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = piped{out}, piped{out}
	if stderr != stdout {
		errf, err := open(stderr)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("childproc: %s: %w", name, err)
		}
		files = append(files, errf)
		cmd.Stderr = errf
	}
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = 5 * time.Second // a child of the process holding the pipe does not hold up Wait
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, fmt.Errorf("childproc: start %s: %w", name, err)
	}
	p := &Proc{Name: name, Stdout: stdout, Stderr: stderr, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait() // and the copy of the pipe
		closeAll()
		close(p.done)
	}()
	return p, nil
}

// piped hides the *os.File from exec.Cmd, which then gives the process a
// pipe and copies it to the file.
type piped struct{ w io.Writer }

func (p piped) Write(b []byte) (int, error) { return p.w.Write(b) }

// Pid returns the process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and was reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended, and Wait's error.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Signal sends sig to the process group.
func (p *Proc) Signal(sig syscall.Signal) error {
	if err := signalGroup(p.Pid(), sig); err != nil {
		return fmt.Errorf("childproc: signal %s: %w", p.Name, err)
	}
	return nil
}

// Wait waits up to d for the process to exit and returns Wait's error; it
// returns an error saying so when the process is still running.
func (p *Proc) Wait(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return p.err
	case <-t.C:
		return fmt.Errorf("childproc: %s still running after %v", p.Name, d)
	}
}

// Stop sends sig to the process group and waits up to grace for the
// process to end, then kills the group. It reports whether the process
// ended within grace, and returns only once it has been reaped.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) (graceful bool, err error) {
	if err := p.Signal(sig); err != nil {
		return false, err
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		// The leader is gone; make sure nothing it started lingers.
		_ = signalGroup(p.Pid(), syscall.SIGKILL)
		return true, nil
	case <-timer.C:
	}
	p.Kill()
	return false, nil
}

// Kill kills the process group and reaps the process. A process already
// gone is not an error.
func (p *Proc) Kill() {
	resumeGroup(p.Pid()) // a stopped process must run to die of SIGKILL promptly
	_ = signalGroup(p.Pid(), syscall.SIGKILL)
	<-p.done
}

// State returns the process's state letter from /proc (R, S, T for
// stopped, Z), or "" where /proc is not available.
func (p *Proc) State() string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}

// AwaitStopped waits until the process is stopped (state T), which
// SIGSTOP makes it at some point after kill(2) returned.
func (p *Proc) AwaitStopped(d time.Duration) error {
	end := time.Now().Add(d)
	for {
		switch s := p.State(); s {
		case "T", "t":
			return nil
		case "":
			return errors.New("childproc: process state unknown (no /proc)")
		}
		if time.Now().After(end) {
			return fmt.Errorf("childproc: %s not stopped after %v (state %s)", p.Name, d, p.State())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Tail returns the last n lines of the file at path.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no file: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
