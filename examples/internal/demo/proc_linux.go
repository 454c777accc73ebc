package demo

import "syscall"

// childAttr puts an instance in a process group of its own, and has the
// kernel kill it if the orchestrator dies without cleaning up (even by
// SIGKILL, and even while the instance is stopped by SIGSTOP, when it
// cannot notice that its standard input has closed).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
