//go:build !unix

package cdc_test

import (
	"os"
	"time"
)

// cpuTime returns 0: the CPU time of the process is not measured here.
func cpuTime() time.Duration { return 0 }

// switches returns 0: context switches are not counted here.
func switches() int64 { return 0 }

// childSwitches returns 0: context switches are not counted here.
func childSwitches(*os.ProcessState) int64 { return 0 }
