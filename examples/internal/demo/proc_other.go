//go:build unix && !linux

package demo

import "syscall"

// childAttr puts an instance in a process group of its own. An instance
// notices the orchestrator's death when its standard input closes.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
