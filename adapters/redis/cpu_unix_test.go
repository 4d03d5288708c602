//go:build unix

package redis_test

import (
	"syscall"
	"testing"
	"time"
)

// reportCPU starts counting the process's CPU time (user and system, the
// client's alone: redis-server is another process); the function it
// returns reports it per entry as cpu-ns/op. On a loaded machine it moves
// less than the wall time.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
