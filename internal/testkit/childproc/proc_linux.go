//go:build linux

package childproc

import (
	"errors"
	"syscall"
)

// sysProcAttr puts a child in its own process group, so that a signal
// reaches everything it started, and has the kernel kill it if the test
// binary dies before its cleanups run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends sig to the process group led by pid; a group already
// gone is not an error.
func signalGroup(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// resumeGroup continues a stopped process group (SIGCONT); errors are
// ignored, as the group may be gone.
func resumeGroup(pid int) { _ = signalGroup(pid, syscall.SIGCONT) }
