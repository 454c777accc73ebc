package leasehold

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asterforge/aster/natsstore/embedded"
)

// natsServerEnv makes a test binary started with it a nats-server of its
// own (serveNATS) instead of running tests: BenchmarkWatchdogRenewCPUNATS
// runs the server in a child process, so that the benchmark's process CPU
// time is the client's alone.
const natsServerEnv = "ASTER_LEASEHOLD_NATS_SERVER"

// serveNATS runs an embedded nats-server (JetStream, a temporary store)
// until standard input closes (the benchmark ended, or died), after
// printing "ready <url>". It returns the process's exit code.
func serveNATS() int {
	s, err := embedded.Start(context.Background(), embedded.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "nats-server:", err)
		return 1
	}
	defer func() { _ = s.Close() }()
	fmt.Println("ready", s.ClientURL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// natsProcess is a nats-server in a child process (serveNATS).
type natsProcess struct {
	url   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startNATSProcess starts a nats-server in a child process, stopped by
// b.Cleanup.
func startNATSProcess(b *testing.B) *natsProcess {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), natsServerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &natsProcess{cmd: cmd, stdin: stdin}
	b.Cleanup(p.stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if err != nil || !ok {
		b.Fatalf("nats-server process did not start: %q %v", line, err)
	}
	p.url = url
	return p
}

// stop ends the process (it exits when its standard input closes), killing
// it after 10 s.
func (p *natsProcess) stop() {
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// cpu returns the CPU time (user and system) the process has used, from
// /proc (in clock ticks of 10 ms); 0 where there is no /proc.
func (p *natsProcess) cpu() time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces), from the third.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
