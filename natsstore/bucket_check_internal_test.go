package natsstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
)

// mutedJS leaves requests unanswered, as a cluster does while its meta group
// or the bucket's stream elects a leader: the account's information while
// muteAccount is set, and the next dropStreams stream reads.
type mutedJS struct {
	jetstream.JetStream
	muteAccount  atomic.Bool
	dropStreams  atomic.Int32
	accountAsked atomic.Int32 // AccountInfo calls left unanswered so far
	streamCalls  atomic.Int32
}

func (j *mutedJS) AccountInfo(ctx context.Context) (*jetstream.AccountInfo, error) {
	if j.muteAccount.Load() {
		j.accountAsked.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return j.JetStream.AccountInfo(ctx)
}

func (j *mutedJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	j.streamCalls.Add(1)
	if j.dropStreams.Add(-1) >= 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return j.JetStream.Stream(ctx, name)
}

// mutedStore opens a store of a bucket of three replicas through a mutedJS.
func mutedStore(t *testing.T) (*Store, *mutedJS, jetstream.JetStream) {
	t.Helper()
	c := natstest.StartCluster(t, 3)
	nc, err := nats.Connect(c.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	mj := &mutedJS{JetStream: js}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := New(ctx, mj, Config{Replicas: 3})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, mj, js
}

// A check sent while the stream had no leader is sent again, as reads and
// writes are: a request that reaches a stream during its election is
// dropped, and a check waiting for its answer held the check slot, and every
// acquire that needed a check, until its deadline (5 s by default) although
// the stream was back in under one.
func TestCheckResendsAnUnansweredRequest(t *testing.T) {
	t.Parallel()
	s, mj, _ := mutedStore(t)
	mj.streamCalls.Store(0)
	mj.dropStreams.Store(1)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	require.NoError(t, s.Check(ctx), "the check waited for the dropped request's answer")
	assert.Equal(t, int32(2), mj.streamCalls.Load(), "the dropped request was sent again")
}

// guarantees.md: an expiry marker is trusted once the stream, read after
// it, has no MaxAge. Reading the stream needs its leader only: the marker is
// trusted while the meta group has no leader (a failover of the server that
// led both leaves it so for seconds after the stream is back) and while a
// check of the bucket, waiting for the meta group, holds the check slot. A
// stream edited to have a MaxAge is still caught.
func TestExpiryConfirmedWithoutTheMetaGroup(t *testing.T) {
	t.Parallel()
	s, mj, js := mutedStore(t)
	mj.muteAccount.Store(true)
	var wg sync.WaitGroup
	defer wg.Wait()
	checkCtx, stopCheck := context.WithTimeout(context.Background(), 10*time.Second)
	defer stopCheck()
	wg.Go(func() { _ = s.Check(checkCtx) })
	require.Eventually(t, func() bool { return mj.accountAsked.Load() > 0 }, 5*time.Second, time.Millisecond,
		"the check never asked for the account's information")

	confirm := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		deadline, _ := ctx.Deadline()
		return s.writes.confirmExpiry(ctx, deadline, "job")
	}
	require.NoError(t, confirm(), "the expiry marker waited for the check holding the slot")
	stopCheck()
	wg.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "KV_"+s.Bucket())
	require.NoError(t, err)
	cfg := st.CachedInfo().Config
	cfg.MaxAge = time.Hour
	_, err = js.UpdateStream(ctx, cfg)
	require.NoError(t, err)
	err = confirm()
	require.ErrorIs(t, err, lease.ErrUnavailable, "a stream with a MaxAge, checked without the meta group")
	mj.muteAccount.Store(false)
	err = confirm()
	require.ErrorIs(t, err, lease.ErrStoreConfig, "a stream with a MaxAge")
	require.ErrorContains(t, err, "MaxAge")
}
