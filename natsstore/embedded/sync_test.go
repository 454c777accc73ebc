package embedded_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/natsstore/embedded"
)

func TestSyncInterval(t *testing.T) {
	for _, tc := range []struct {
		set      time.Duration
		interval time.Duration
		always   bool
	}{
		{0, 2 * time.Minute, false},
		{time.Second, time.Second, false},
		{embedded.SyncAlways, 2 * time.Minute, true},
	} {
		srv, err := embedded.Start(ctxT(t), embedded.Config{SyncInterval: tc.set})
		require.NoError(t, err)
		js := srv.NATS().JetStreamConfig()
		assert.Equal(t, tc.interval, js.SyncInterval, "%v", tc.set)
		assert.Equal(t, tc.always, js.SyncAlways, "%v", tc.set)
		require.NoError(t, srv.Close())
	}
	_, err := embedded.Start(ctxT(t), embedded.Config{SyncInterval: -2 * time.Second})
	require.Error(t, err)
}

// BenchmarkSync measures what sync_interval: always costs a lease's writes:
// acquire (one write of a new key), renew (one write) and handover (a
// release and the next owner's acquisition: two writes), on a server whose
// store is on the test's temporary directory, with the server's default
// (flush every 2 minutes) and with every write flushed before it is
// acknowledged. docs/nats.md quotes a run.
//
//	go test -run '^$' -bench BenchmarkSync -benchtime 2000x ./natsstore/embedded
func BenchmarkSync(b *testing.B) {
	for _, mode := range []struct {
		name string
		sync time.Duration
	}{{"sync=default", 0}, {"sync=always", embedded.SyncAlways}} {
		b.Run(mode.name, func(b *testing.B) {
			srv, err := embedded.Start(context.Background(), embedded.Config{StoreDir: b.TempDir(), SyncInterval: mode.sync})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			dial := func() *natsstore.Store {
				s, err := natsstore.Dial(context.Background(), natsstore.DialOptions{URLs: []string{srv.ClientURL()}},
					natsstore.Config{})
				if err != nil {
					b.Fatal(err)
				}
				return s
			}
			a, other := dial(), dial()
			defer a.Close()
			defer other.Close()
			ctx := context.Background()
			claim := func(id, owner string) lease.Claim {
				return lease.Claim{LeaseID: id, OwnerID: owner, Term: lease.NewTerm(), TTL: 30 * time.Second}
			}
			run := 0 // keys of their own for every run of a sub-benchmark
			b.Run("acquire", func(b *testing.B) {
				run++
				i := 0
				for b.Loop() {
					i++
					if _, err := a.Acquire(ctx, claim(fmt.Sprint("acquire-", run, "-", i), "a")); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("renew", func(b *testing.B) {
				run++
				got, err := a.Acquire(ctx, claim(fmt.Sprint("renew-", run), "a"))
				if err != nil || !got.Acquired {
					b.Fatal(err)
				}
				l := got.Lease
				for b.Loop() {
					if l, err = a.Renew(ctx, l); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("handover", func(b *testing.B) {
				run++
				key := fmt.Sprint("handover-", run)
				stores := [2]*natsstore.Store{a, other}
				got, err := a.Acquire(ctx, claim(key, "a"))
				if err != nil || !got.Acquired {
					b.Fatal(err)
				}
				l, i := got.Lease, 0
				for b.Loop() {
					if err := stores[i%2].Release(ctx, l); err != nil {
						b.Fatal(err)
					}
					i++
					next, err := stores[i%2].Acquire(ctx, claim(key, fmt.Sprint("owner-", i%2)))
					if err != nil || !next.Acquired {
						b.Fatalf("handover %d: %v", i, err)
					}
					l = next.Lease
				}
			})
		})
	}
}
