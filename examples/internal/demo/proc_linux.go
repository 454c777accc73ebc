package demo

import "syscall"

// ChildAttr, as an exec.Cmd's SysProcAttr, puts a child in a process
// group of its own, and has the kernel kill it if the orchestrator dies
// without cleaning up (even by SIGKILL, and even while the child is
// stopped by SIGSTOP, when it cannot notice that its standard input has
// closed).
func ChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
