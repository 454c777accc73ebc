package natsstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/natsstore"
)

// The figures docs/nats.md gives for a watch whose user may not answer flow
// control ($JS.FC): the server delivers about 2 MiB of updates, then
// nothing, for good. A plain nats.go KV watcher is used (natsstore's
// liveness check would re-create it). Run it with -v to see the figures:
//
//	go test -race -count=1 -v -run TestWatchWithoutFlowControlStallsAfterAbout2MiB ./natsstore
func TestWatchWithoutFlowControlStallsAfterAbout2MiB(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1024, 200} {
		t.Run(fmt.Sprintf("%dB", size), func(t *testing.T) {
			t.Parallel()
			srv := natstest.Start(t, natstest.WithUser("admin", "a"),
				natstest.WithRestrictedUser("standby", "s", watchPermissions(natsstore.DefaultBucket, true), []string{"_INBOX.>"}))
			dial(t, srv.ClientURL(), natsstore.Config{}, natsstore.DialOptions{User: "admin", Password: "a"}) // creates the bucket
			_, ajs := conn(t, srv.ClientURL(), nats.UserInfo("admin", "a"))
			writer := bucket(t, ajs, natsstore.DefaultBucket)
			_, sjs := conn(t, srv.ClientURL(), nats.UserInfo("standby", "s"))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w, err := bucket(t, sjs, natsstore.DefaultBucket).Watch(ctx, "job", jetstream.UpdatesOnly())
			require.NoError(t, err)
			defer func() { _ = w.Stop() }()

			value := []byte(strings.Repeat("x", size))
			puts := 3 << 20 / size // 3 MiB of values
			for range puts {
				_, err := writer.Put(ctxT(t), "job", value)
				require.NoError(t, err)
			}
			got := 0
			for quiet := time.NewTimer(3 * time.Second); ; {
				select {
				case e := <-w.Updates():
					if e != nil {
						got++
					}
					quiet.Reset(3 * time.Second)
					continue
				case <-quiet.C:
				}
				break
			}
			t.Logf("%d B values: %d of %d updates delivered (%.2f MiB of values), then nothing for 3 s",
				size, got, puts, float64(got*size)/(1<<20))
			assert.Less(t, got, puts, "the watch stalls")
			assert.Greater(t, got*size, 1<<20, "after more than 1 MiB")
			assert.Less(t, got*size, 5<<19, "and before 2.5 MiB")
		})
	}
}
