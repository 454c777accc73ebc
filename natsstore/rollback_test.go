package natsstore_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// copyDir copies the directory tree src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}))
}

// A server that lost acknowledged writes (here: its store directory rolled
// back, as a power loss before an fsync does) issues sequences again: a
// store that saw the larger ones stops instead of handing out a token it
// may have handed out before.
func TestRolledBackServerStopsTheStore(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	var events eventLog
	s := dial(t, srv.ClientURL(), natsstore.Config{OnEvent: events.add})
	held := mustAcquire(t, s, claim("job", "owner-a"))

	srv.Shutdown()
	snapshot := t.TempDir()
	copyDir(t, srv.StoreDir(), snapshot)
	srv.Restart(t)
	for range 3 {
		held = awaitNoError(t, func() (lease.Lease, error) { return s.Renew(ctxT(t), held) })
		other := mustAcquire(t, s, claim("other", "owner-a"))
		require.NoError(t, s.Release(ctxT(t), other))
	}

	srv.Shutdown()
	require.NoError(t, os.RemoveAll(srv.StoreDir()))
	copyDir(t, snapshot, srv.StoreDir())
	srv.Restart(t)
	// Whatever comes first, the check after the reconnect or a write, the
	// store refuses to hand out a token at or below the revisions it saw.
	for {
		a, err := s.Acquire(ctxT(t), claim("third", "owner-b"))
		if errors.Is(err, lease.ErrUnavailable) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		require.ErrorIs(t, err, lease.ErrStoreConfig, "token %d after the store saw revision %d", a.Lease.Token, held.Revision)
		break
	}
	var be *natsstore.BucketError
	require.ErrorAs(t, s.Err(), &be)
	assert.Equal(t, natsstore.ProblemSequenceRegression, be.Problem)
	t.Log(be)
	_, err := s.Renew(ctxT(t), held)
	require.ErrorIs(t, err, lease.ErrStoreConfig)
	// The goroutine that stopped the store reports it just after: a call
	// can see the store stopped before the event is out.
	var got []natsstore.SequenceRegression
	require.Eventually(t, func() bool {
		got = got[:0]
		for _, ev := range events.all() {
			if r, ok := ev.(natsstore.SequenceRegression); ok {
				got = append(got, r)
			}
		}
		return len(got) > 0
	}, 5*time.Second, 10*time.Millisecond)
	require.Len(t, got, 1)
	assert.Less(t, got[0].Got, got[0].Highest)
}
