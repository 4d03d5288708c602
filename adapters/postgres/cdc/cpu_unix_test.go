//go:build unix

package cdc_test

import (
	"os"
	"syscall"
	"time"
)

// cpuTime returns the CPU time this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// switches returns the context switches (voluntary and not) of this
// process's threads so far.
func switches() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return int64(ru.Nvcsw + ru.Nivcsw)
}

// childSwitches returns the context switches of the ended process ps.
func childSwitches(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return int64(ru.Nvcsw + ru.Nivcsw)
}
