//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/asterforge/aster/examples/internal/demo"
)

// proc is a member process the parent started.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready chan struct{} // closed when it prints "ready"
	done  chan struct{} // closed when it has exited
}

// startProc starts exe as member name, with its NATS connection through
// url, and waits until it prints "ready" or wait passes.
func startProc(exe, name, url string, ttl time.Duration, ids int, calls bool, wait time.Duration) (*proc, error) {
	args := []string{memberArg, "-name", name, "-nats", url, "-ttl", ttl.String(), "-identities", fmt.Sprint(ids)}
	if calls {
		args = append(args, "-calls")
	}
	p := &proc{name: name, cmd: exec.Command(exe, args...), ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd.Stdout = &readyWriter{ready: p.ready}
	p.cmd.Stderr = os.Stderr
	// A process group of its own (a Ctrl-C reaches the parent only, which
	// stops its members), and, on Linux, killed with the parent.
	p.cmd.SysProcAttr = demo.ChildAttr()
	p.cmd.WaitDelay = 2 * time.Second // bounds the copying of its output once it has exited
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		_ = p.stdin.Close()
		return nil, err
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	select {
	case <-p.ready:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("member %s exited before it was ready: %v", name, p.cmd.ProcessState)
	case <-time.After(wait):
		p.stop()
		return nil, fmt.Errorf("member %s not ready within %v", name, wait)
	}
}

func (p *proc) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// stop ends the process: SIGTERM (and SIGCONT, should it be paused) and
// 10 s to leave the cluster, then SIGKILL.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.stdin.Close()
	_ = p.signal(syscall.SIGCONT)
	_ = p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(10 * time.Second):
	}
	_ = p.kill()
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() error {
	err := p.cmd.Process.Kill()
	select {
	case <-p.done:
		return err
	case <-time.After(5 * time.Second):
		return errors.Join(err, fmt.Errorf("member %s still running 5 s after SIGKILL", p.name))
	}
}

// readyWriter is a member's standard output: it closes ready at the line
// "ready".
type readyWriter struct {
	mu    sync.Mutex
	line  []byte
	ready chan struct{}
}

func (w *readyWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.line = append(w.line, b...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			return len(b), nil
		}
		if string(w.line[:i]) == "ready" {
			select {
			case <-w.ready:
			default:
				close(w.ready)
			}
		}
		w.line = w.line[i+1:]
	}
}
