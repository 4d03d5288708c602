//go:build !linux

package testenv

import (
	"errors"
	"os"
	"syscall"
)

// sysProcAttr has no process groups to set up outside Linux.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup kills the process pid itself: outside Linux the harness neither
// groups children nor stops them gracefully.
func signalGroup(pid int, _ syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}
