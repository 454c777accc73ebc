//go:build unix && !linux

package demo

import "syscall"

// ChildAttr, as an exec.Cmd's SysProcAttr, puts a child in a process
// group of its own. A child notices the orchestrator's death when its
// standard input closes.
func ChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
