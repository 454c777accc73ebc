package embedded_test

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/natsstore/embedded"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestEmbeddedServerKeepsLeasesAcrossRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	srv, err := embedded.Start(ctxT(t), embedded.Config{StoreDir: dir})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(srv.ClientURL(), "nats://127.0.0.1:"), srv.ClientURL())
	assert.Equal(t, dir, srv.StoreDir())

	s, err := natsstore.Dial(ctxT(t), natsstore.DialOptions{URLs: []string{srv.ClientURL()}}, natsstore.Config{})
	require.NoError(t, err)
	c := lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-owner-a", TTL: time.Minute}
	a, err := s.Acquire(ctxT(t), c)
	require.NoError(t, err)
	require.True(t, a.Acquired)
	require.NoError(t, s.Close())
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close(), "Close is idempotent")
	require.DirExists(t, dir, "an explicit store directory is kept")

	srv, err = embedded.Start(ctxT(t), embedded.Config{StoreDir: dir})
	require.NoError(t, err)
	defer srv.Close()
	s, err = natsstore.Dial(ctxT(t), natsstore.DialOptions{URLs: []string{srv.ClientURL()}}, natsstore.Config{})
	require.NoError(t, err)
	defer s.Close()
	b, err := s.Acquire(ctxT(t), lease.Claim{LeaseID: "job", OwnerID: "owner-b", Term: "term-owner-b", TTL: time.Second})
	require.NoError(t, err)
	assert.False(t, b.Acquired, "the lease survived the restart")
	assert.Equal(t, "owner-a", b.Holder.OwnerID)
	_, err = s.Renew(ctxT(t), a.Lease)
	require.NoError(t, err, "and its owner can renew it")
}

func TestEmbeddedTemporaryStoreIsRemoved(t *testing.T) {
	srv, err := embedded.Start(ctxT(t), embedded.Config{})
	require.NoError(t, err)
	dir := srv.StoreDir()
	require.DirExists(t, dir)
	require.NoError(t, srv.Close())
	require.NoDirExists(t, dir)
}

func TestEmbeddedFixedPort(t *testing.T) {
	first, err := embedded.Start(ctxT(t), embedded.Config{})
	require.NoError(t, err)
	addr := first.NATS().Addr().String()
	require.NoError(t, first.Close())
	_, p, _ := strings.Cut(addr, ":")
	srv, err := embedded.Start(ctxT(t), embedded.Config{Port: port(t, p)})
	require.NoError(t, err)
	defer srv.Close()
	assert.Equal(t, "nats://127.0.0.1:"+p, srv.ClientURL())

	// A second server on the same port fails clearly.
	_, err = embedded.Start(ctxT(t), embedded.Config{Port: port(t, p), ReadyTimeout: 500 * time.Millisecond})
	require.Error(t, err)

	_, err = embedded.Start(ctxT(t), embedded.Config{Port: -2})
	require.Error(t, err)
}

// A busy port fails at once, saying so, instead of after ReadyTimeout.
func TestEmbeddedBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port

	ctx := ctxT(t)
	_, err = embedded.Start(ctx, embedded.Config{Port: busy, ReadyTimeout: time.Minute})
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	assert.Contains(t, err.Error(), strconv.Itoa(busy))
	require.NoError(t, ctx.Err(), "not after a timeout")
}

func port(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// Importing natsstore alone must not compile nats-server.
func TestNatsstoreDoesNotImportServer(t *testing.T) {
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command lists the dependencies")
	out, err := exec.Command(gobin, "list", "-deps", "github.com/asterforge/aster/natsstore").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := string(out)
	require.Contains(t, deps, "github.com/nats-io/nats.go/jetstream")
	assert.NotContains(t, deps, "github.com/nats-io/nats-server")
}
