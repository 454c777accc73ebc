package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// waitLimit bounds every wait for a process to start, stop or die.
const waitLimit = 20 * time.Second

// Build compiles the main packages pkgs (such as "./cmd/chaos-holder") of
// the module in moduleDir into dir, and returns the paths of the binaries by
// the base name of their package. Call it once per test run.
func Build(ctx context.Context, moduleDir, dir string, pkgs ...string) (map[string]string, error) {
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = moduleDir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, out.String())
	}
	bins := map[string]string{}
	for _, p := range pkgs {
		bins[filepath.Base(p)] = filepath.Join(dir, filepath.Base(p))
	}
	return bins, nil
}

// Proc is one OS process started by the harness, the leader of a process
// group of its own.
type Proc struct {
	Name string
	Out  string // the file that receives its stdout and stderr

	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's, valid once done is closed

	mu      sync.Mutex
	stopped bool
}

// Start starts bin with args as a process named name, its output appended to
// dir/name.out, and registers its death with t.Cleanup.
func Start(t testing.TB, dir, name, bin string, args ...string) (*Proc, error) {
	out, err := os.OpenFile(filepath.Join(dir, name+".out"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, Out: out.Name(), cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { _ = p.Kill() })
	return p, nil
}

// PID returns the process ID.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process group, unless it has exited.
func (p *Proc) signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	if err := syscall.Kill(-p.PID(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: kill -%d: %w", p.Name, sig, err)
	}
	return nil
}

// Signal sends sig to the process group, unless the process has exited.
func (p *Proc) Signal(sig syscall.Signal) error { return p.signal(sig) }

// Kill sends SIGKILL to the process group and waits until the process is
// reaped. It is idempotent.
func (p *Proc) Kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	return p.wait(waitLimit)
}

// Pause sends SIGSTOP to the process group.
func (p *Proc) Pause() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	return p.signal(syscall.SIGSTOP)
}

// Resume sends SIGCONT to the process group.
func (p *Proc) Resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = false
	return p.signal(syscall.SIGCONT)
}

// Terminate sends SIGTERM (and SIGCONT, in case it is paused) and waits up
// to limit for the process to exit, then kills it. It returns the process's
// exit error, or an error saying it had to be killed.
func (p *Proc) Terminate(limit time.Duration) error {
	if err := p.signal(syscall.SIGTERM); err != nil {
		return err
	}
	_ = p.Resume()
	if err := p.wait(limit); err != nil {
		_ = p.Kill()
		return fmt.Errorf("%s did not exit within %v of SIGTERM; killed", p.Name, limit)
	}
	return p.err
}

// wait waits up to limit for the process to be reaped.
func (p *Proc) wait(limit time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(limit):
		return fmt.Errorf("%s (pid %d) still running after %v", p.Name, p.PID(), limit)
	}
}

// Output returns what the process wrote so far.
func (p *Proc) Output() string {
	b, _ := os.ReadFile(p.Out)
	return string(b)
}

// AwaitOutput waits until the process's output holds n occurrences of
// line, or fails after limit or when the process exits.
func (p *Proc) AwaitOutput(line string, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if strings.Count(p.Output(), line) >= n {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("%s exited before printing %q: %v\n%s", p.Name, line, p.err, tail(p.Output()))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not print %q within %v\n%s", p.Name, line, limit, tail(p.Output()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}

// ModuleDir returns the directory of the module that holds the current
// directory (as `go env GOMOD` says), for Build.
func ModuleDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside a module")
	}
	return filepath.Dir(mod), nil
}
