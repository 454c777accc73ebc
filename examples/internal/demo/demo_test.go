//go:build unix

package demo

import (
	"bytes"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestConsoleKeepsTheStatusLineBelow(t *testing.T) {
	var out buffer
	c := NewConsole(&out, true, func() int { return 20 })
	c.SetStatus(func() string { return "status line that is too long" })
	_, _ = c.Write([]byte("first\nsec"))
	_, _ = c.Write([]byte("ond\n"))
	c.Close()
	got := out.String()
	assert.Equal(t, 2, strings.Count(got, "\r\x1b[K"), "the status line is cleared before each line: %q", got)
	assert.Contains(t, got, "first\n")
	assert.Contains(t, got, "second\n", "a line split across writes stays whole")
	assert.Contains(t, got, "status line that i…", "truncated to the terminal's width")
	assert.True(t, strings.HasSuffix(got, "\r\x1b[K"), "Close clears the status line: %q", got)
}

func TestConsoleWithoutStatus(t *testing.T) {
	var out buffer
	c := NewConsole(&out, false, nil)
	c.SetStatus(func() string { return "never shown" })
	c.Println("a\nb")
	c.Redraw()
	c.Close()
	assert.Equal(t, "a\nb\n", out.String())
}

func TestChildStopsGracefully(t *testing.T) {
	var out buffer
	c, err := StartChild("sh", "/bin/sh", []string{"-c", "trap '' TERM; echo hello; read line; echo bye"}, nil,
		NewPrefixWriter(NewConsole(&out, false, nil), "sh │ "))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "hello") }, 5*time.Second, 10*time.Millisecond)
	assert.True(t, c.Stop(5*time.Second), "it ignores SIGTERM, but the end of its standard input ends it")
	assert.True(t, c.Exited())
	assert.Equal(t, "sh │ hello\nsh │ bye\n", out.String())
}

func TestChildKilledAfterGrace(t *testing.T) {
	var out buffer
	c, err := StartChild("stubborn", "/bin/sh", []string{"-c", "trap '' TERM; echo ready; exec sleep 30"}, nil,
		NewPrefixWriter(NewConsole(&out, false, nil), ""))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "ready") }, 5*time.Second, 10*time.Millisecond)
	start := time.Now()
	assert.False(t, c.Stop(200*time.Millisecond), "it ignores SIGTERM: killed")
	assert.True(t, c.Exited())
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.ErrorIs(t, syscall.Kill(c.PID(), 0), syscall.ESRCH)
	assert.NoError(t, c.Signal(syscall.SIGTERM), "signalling a reaped child does nothing")
}

func TestChildPausedIsStillStopped(t *testing.T) {
	var out buffer
	c, err := StartChild("paused", "/bin/sh", []string{"-c", "echo ready; exec sleep 30"}, nil,
		NewPrefixWriter(NewConsole(&out, false, nil), ""))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "ready") }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, c.Signal(syscall.SIGSTOP))
	assert.True(t, c.Stop(5*time.Second), "SIGTERM and SIGCONT end a stopped process")
}

func TestShortOwner(t *testing.T) {
	assert.Equal(t, "runtime-0123abcd…", ShortOwner("runtime-0123abcd0123abcd0123abcd0123abcd"))
	assert.Equal(t, "other", ShortOwner("other"))
}
