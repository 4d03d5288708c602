//go:build !linux

package main

import "syscall"

// sysProcAttr puts the demo's server in a process group of its own: a ^C
// at the terminal reaches the demo, which stops it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
