//go:build unix

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/asterforge/aster/examples/internal/demo"
)

// proc is a member process the parent started.
type proc struct {
	*demo.Child
}

// startProc starts exe as member name, with its NATS connection through
// url, and waits until it prints "ready" or wait passes.
func startProc(exe, name, url string, ttl time.Duration, ids int, calls bool, wait time.Duration) (*proc, error) {
	args := []string{memberArg, "-name", name, "-nats", url, "-ttl", ttl.String(), "-identities", fmt.Sprint(ids)}
	if calls {
		args = append(args, "-calls")
	}
	ready := make(chan struct{})
	c, err := demo.StartChild(name, exe, args, nil, &readyWriter{ready: ready, rest: os.Stderr})
	if err != nil {
		return nil, err
	}
	p := &proc{Child: c}
	select {
	case <-ready:
		return p, nil
	case <-c.Done():
		return nil, fmt.Errorf("member %s exited before it was ready: %v", name, c.Err())
	case <-time.After(wait):
		p.stop()
		return nil, fmt.Errorf("member %s not ready within %v", name, wait)
	}
}

// stop ends the process: SIGTERM (and SIGCONT, should it be paused) and
// 10 s to leave the cluster, then SIGKILL.
func (p *proc) stop() { p.Stop(10 * time.Second) }

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() error {
	p.Kill()
	if !p.Exited() {
		return fmt.Errorf("member %s still running 5 s after SIGKILL", p.Name())
	}
	return nil
}

// readyWriter is a member's output: it closes ready at the line "ready"
// and writes every other line to rest.
type readyWriter struct {
	mu    sync.Mutex
	line  []byte
	ready chan struct{}
	rest  io.Writer
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
		} else {
			_, _ = w.rest.Write(w.line[:i+1])
		}
		w.line = w.line[i+1:]
	}
}
