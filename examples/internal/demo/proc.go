//go:build unix

package demo

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Child is one process the demo started. The orchestrator holds the write end of
// its standard input: when the orchestrator exits, however it exits, the
// instance reads EOF and shuts down.
type Child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when the process has been reaped
	err   error         // Wait's answer, once done is closed
}

// StartChild starts exe with args as the child called name, its output written to
// out (a PrefixWriter's last partial line is written once it exits), in a
// process group of its own (so that a Ctrl-C at the terminal reaches only the
// orchestrator, which then stops its instances in order).
func StartChild(name, exe string, args, env []string, out io.Writer) (*Child, error) {
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = ChildAttr()
	cmd.WaitDelay = 2 * time.Second // bounds the copying of its output after it exits
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		_ = stdin.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &Child{name: name, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		if p, ok := out.(*PrefixWriter); ok {
			p.flush()
		}
		close(c.done)
	}()
	return c, nil
}

// Name is the child's name.
func (c *Child) Name() string { return c.name }

// PID is the child's process ID.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Done is closed when the child has exited and been reaped.
func (c *Child) Done() <-chan struct{} { return c.done }

// Err is how the child exited (exec.Cmd.Wait's answer), once Done is
// closed.
func (c *Child) Err() error {
	<-c.done
	return c.err
}

// Exited reports whether the child has exited and been reaped.
func (c *Child) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the child, unless it has been reaped (its PID may
// then belong to another process).
func (c *Child) Signal(sig syscall.Signal) error {
	if c.Exited() {
		return nil
	}
	if err := c.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: %v: %w", c.name, sig, err)
	}
	return nil
}

// Wait waits at most timeout for the child to exit.
func (c *Child) Wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// Stop asks the child to shut down gracefully (SIGTERM, and SIGCONT in case
// it is stopped), waits at most grace, then kills it and waits for it to be
// reaped. It reports whether the child stopped gracefully.
func (c *Child) Stop(grace time.Duration) bool {
	_ = c.Signal(syscall.SIGTERM)
	_ = c.Signal(syscall.SIGCONT)
	_ = c.stdin.Close()
	if c.Wait(grace) {
		return true
	}
	c.Kill()
	return false
}

// Kill sends SIGKILL and waits for the child to be reaped.
func (c *Child) Kill() {
	_ = c.Signal(syscall.SIGKILL)
	_ = c.stdin.Close()
	c.Wait(5 * time.Second)
}
