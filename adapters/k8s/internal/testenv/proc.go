package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// proc is one run of a child process whose output goes to a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once Wait has returned
	err  error         // Wait's result; read only after done is closed
}

// startProc starts bin with args in its own process group, appending its
// stdout and stderr to logPath after a header line naming the run.
func startProc(name, bin string, args []string, logPath string) (*proc, error) {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testenv: open %s log: %w", name, err)
	}
	defer logFile.Close() // the child holds its own copy of the descriptor
	fmt.Fprintf(logFile, "==== testenv: %s start %s\n==== %s %s\n",
		name, time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))

	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testenv: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends sig to the process group and waits up to grace for the process
// to end, then kills the group. It reports whether the process ended within
// grace. It returns only once the process has been reaped.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) (graceful bool, err error) {
	if err := signalGroup(p.cmd.Process.Pid, sig); err != nil {
		return false, fmt.Errorf("testenv: signal %s: %w", p.name, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		// The leader is gone; make sure nothing it started lingers.
		_ = signalGroup(p.cmd.Process.Pid, syscall.SIGKILL)
		return true, nil
	case <-timer.C:
	}
	if err := signalGroup(p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return false, fmt.Errorf("testenv: kill %s: %w", p.name, err)
	}
	<-p.done
	return false, nil
}

// tail returns the last n lines of the file at path, or a note saying why
// there are none.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	b = bytes.TrimRight(b, "\n")
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n--
			if n == 0 {
				return string(b[i+1:])
			}
		}
	}
	return string(b)
}
