package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// result is what one run of the command printed.
type result struct {
	code           int
	stdout, stderr string
}

// aster runs the command with env as its environment.
func aster(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func TestUsage(t *testing.T) {
	r := aster(t, nil)
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "usage: aster <command>")
	for _, cmd := range []string{"leases ", "watch LEASE", "shards PREFIX", "status", "tree INSTANCE", "dev"} {
		assert.Contains(t, r.stderr, "\n  "+cmd)
	}

	r = aster(t, nil, "help")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "usage: aster <command>")

	r = aster(t, map[string]string{"NATS_PASSWORD": "s3cret", "NATS_URL": "nats://10.1.2.3:4222"}, "help", "watch")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "usage: aster watch [flags] LEASE")
	assert.Contains(t, r.stdout, "  -s, --server URLs")
	assert.Contains(t, r.stdout, "(default nats://10.1.2.3:4222)", "NATS_URL")
	assert.NotContains(t, r.stdout, "s3cret", "secrets are never printed")

	r = aster(t, nil, "leases", "-h")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "usage: aster leases [flags]\n")
	assert.Contains(t, r.stdout, "  --bucket bucket", "every command that reads a bucket names it with --bucket")

	r = aster(t, nil, "frobnicate")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `aster: unknown command "frobnicate"`)

	r = aster(t, nil, "watch")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "aster watch: expected LEASE")

	r = aster(t, nil, "leases", "a", "b")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "aster leases: expected no arguments")

	r = aster(t, nil, "status", "--bogus")
	assert.Equal(t, 2, r.code)
	assert.Equal(t, "aster status: flag provided but not defined: -bogus (aster help status lists its flags)\n", r.stderr)

	// A bad flag before the command: one line, not the usage around it.
	r = aster(t, nil, "--bogus", "leases")
	assert.Equal(t, 2, r.code)
	assert.Equal(t, "aster: flag provided but not defined: -bogus (aster help lists the commands and flags)\n", r.stderr)
	assert.Empty(t, r.stdout)

	r = aster(t, nil, "watch", "billing.*")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "LeaseID")
}

func TestHuman(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1234567 * time.Nanosecond:              "1ms",
		850 * time.Millisecond:                 "850ms",
		12345 * time.Millisecond:               "12.3s",
		3*time.Minute + 12400*time.Millisecond: "3m12s",
		50 * time.Hour:                         "2d2h0m0s",
		-2 * time.Second:                       "-2s",
	} {
		assert.Equal(t, want, human(d), d.String())
	}
}

// lines is an io.Writer that hands every complete line to a channel.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
	ch  chan string
}

func newLines() *lines { return &lines{ch: make(chan string, 100)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.Reset()
			l.buf.WriteString(line)
			return len(p), nil
		}
		l.ch <- strings.TrimSuffix(line, "\n")
	}
}

// next waits for the next line, for at most 10 s.
func (l *lines) next(t *testing.T) string {
	t.Helper()
	select {
	case line := <-l.ch:
		return line
	case <-time.After(10 * time.Second):
		t.Fatal("no line within 10 s")
		return ""
	}
}

func TestConnectionErrors(t *testing.T) {
	r := aster(t, nil, "leases", "--server", "nats://127.0.0.1:1", "--timeout", "1s")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "aster leases: connect to nats://127.0.0.1:1: nats: no servers available for connection "+
		"(is a NATS server running there? For development, start one with: aster dev)")

	r = aster(t, nil, "status", "--user", "a", "--token", "b")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "set one of --creds, --nkey, --user/--password and --token")

	r = aster(t, nil, "tree", "x", "--tlscert", "c.pem")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--tlscert and --tlskey go together")
}

// TestDevRefusesConnectionFlags: aster dev's server has no authentication,
// so the flags that would ask for it are refused, not ignored; the
// environment, which is not a request to the dev server, is ignored.
func TestDevRefusesConnectionFlags(t *testing.T) {
	for _, args := range [][]string{
		{"dev", "--user", "a", "--password", "b"},
		{"--user", "a", "dev"},
		{"dev", "--token", "t"},
		{"dev", "--creds", "x.creds"},
		{"dev", "--tlscert", "c.pem", "--tlskey", "k.pem"},
		{"dev", "-s", "nats://0.0.0.0:5222"},
	} {
		r := aster(t, nil, args...)
		assert.Equal(t, 2, r.code, "%v", args)
		assert.Contains(t, r.stderr, "aster dev: --", "%v", args)
		assert.Contains(t, r.stderr, "the development server runs without authentication or TLS and takes no "+
			"connection flags", "%v", args)
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
		assert.Empty(t, r.stdout, "%v: no server started", args)
	}
	r := aster(t, nil, "dev", "--user", "a", "--password", "b")
	assert.Contains(t, r.stderr, "aster dev: --password: ", "the first flag set, in order of name")

	// Its help lists its own flags, not those it refuses.
	r = aster(t, nil, "help", "dev")
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "  --port port")
	assert.Contains(t, r.stdout, "  --json")
	for _, refused := range []string{"--server", "--user", "--password", "--token", "--creds", "--tlsca", "--timeout"} {
		assert.NotContains(t, r.stdout, refused)
	}
}
