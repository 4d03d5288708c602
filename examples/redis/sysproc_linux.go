package main

import "syscall"

// sysProcAttr puts the demo's server in a process group of its own (a ^C
// at the terminal reaches the demo, which stops it) and kills it when the
// demo dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
