//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// child is one instance process. The orchestrator holds the write end of
// its standard input: when the orchestrator exits, however it exits, the
// instance reads EOF and shuts down.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *prefixWriter
	done  chan struct{} // closed when the process has been reaped
	err   error         // Wait's answer, once done is closed
}

// startChild starts exe with args as instance name, its output written to
// out, in a process group of its own (so that a Ctrl-C at the terminal
// reaches only the orchestrator, which then stops its instances in order).
func startChild(name, exe string, args, env []string, out *prefixWriter) (*child, error) {
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childAttr()
	cmd.WaitDelay = 2 * time.Second // bounds the copying of its output after it exits
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		_ = stdin.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, stdin: stdin, out: out, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		out.flush()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the child, unless it has been reaped (its PID may
// then belong to another process).
func (c *child) signal(sig syscall.Signal) error {
	if c.exited() {
		return nil
	}
	if err := c.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: %v: %w", c.name, sig, err)
	}
	return nil
}

// wait waits at most timeout for the child to exit.
func (c *child) wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// stop asks the child to shut down gracefully (SIGTERM, and SIGCONT in case
// it is stopped), waits at most grace, then kills it and waits for it to be
// reaped. It reports whether the child stopped gracefully.
func (c *child) stop(grace time.Duration) bool {
	_ = c.signal(syscall.SIGTERM)
	_ = c.signal(syscall.SIGCONT)
	_ = c.stdin.Close()
	if c.wait(grace) {
		return true
	}
	c.kill()
	return false
}

// kill sends SIGKILL and waits for the child to be reaped.
func (c *child) kill() {
	_ = c.signal(syscall.SIGKILL)
	_ = c.stdin.Close()
	c.wait(5 * time.Second)
}
