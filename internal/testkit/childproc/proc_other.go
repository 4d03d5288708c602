//go:build !linux

package childproc

import (
	"errors"
	"os"
	"syscall"
)

// sysProcAttr has no process groups to set up outside Linux.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup signals the process itself outside Linux; SIGKILL kills it.
func signalGroup(pid int, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	if err := p.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// resumeGroup does nothing outside Linux: SIGKILL alone ends the process.
func resumeGroup(int) {}
