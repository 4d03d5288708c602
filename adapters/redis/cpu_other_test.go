//go:build !unix

package redis_test

import (
	"testing"
	"time"
)

// reportCPU reports nothing where getrusage is missing.
func reportCPU(*testing.B) func() { return func() {} }

// cpuTime is 0 where getrusage is missing.
func cpuTime() time.Duration { return 0 }
