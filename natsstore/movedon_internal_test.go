package natsstore

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

// releasingKV holds "job" for owner-a at revision 10 until released is set,
// then shows owner-a's release marker at 11; it takes every write, at 12
// (the test makes none it should refuse).
type releasingKV struct {
	keyValue
	released atomic.Bool
	reads    atomic.Int32
	writes   atomic.Int32
}

func (k *releasingKV) GetLastMsgForSubject(_ context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	k.reads.Add(1)
	if k.released.Load() {
		rec := record{Kind: kindReleased, Owner: "owner-a", Term: "term-a"}
		return &jetstream.RawStreamMsg{Subject: subject, Sequence: 11, Header: nats.Header{hdrOperation: []string{opDelete}},
			Data: appendRecord(nil, rec)}, nil
	}
	rec := record{Kind: kindHeld, Owner: "owner-a", Term: "term-a", TTL: 30 * time.Second}
	return &jetstream.RawStreamMsg{Subject: subject, Sequence: 10, Data: appendRecord(nil, rec)}, nil
}

func (k *releasingKV) PublishMsg(context.Context, *nats.Msg) (*jetstream.PubAck, error) {
	k.writes.Add(1)
	return &jetstream.PubAck{Stream: "KV_b", Sequence: 12}, nil
}

// unconfirmingStore is a store of a bucket of three replicas over a
// releasingKV, with "job" seen held by owner-a, whose stream leader has not
// heard from its one live follower since any read: it never confirms one,
// and says it may later. asked counts its answers.
func unconfirmingStore(t *testing.T) (*Store, *releasingKV, *atomic.Int32) {
	t.Helper()
	nc := serverConn(t)
	asked := new(atomic.Int32)
	since := time.Now().Add(-time.Hour)
	answerInfo(t, nc, func() streamView {
		asked.Add(1)
		return streamView{TS: time.Now(), Cluster: &jetstream.ClusterInfo{Leader: "n2", LeaderSince: &since,
			Replicas: []*jetstream.PeerInfo{{Name: "n1", Current: true, Active: 2 * time.Second},
				{Name: "n3", Offline: true}}}}
	})
	kv := &releasingKV{}
	s := &Store{
		log:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		storeConn:    storeConn{kv: kv, nc: nc},
		openedBucket: openedBucket{replicas: 3, bucket: "b", subject: "$KV.b.", putPrefix: "$KV.b.", infoSubject: "test.info", maxTTL: time.Minute},
		keyBook:      keyBook{keys: newKeyCache(time.Now)},
	}
	s.writes = writesOf(s)
	s.bucketChecks = checksOf(s)
	// A standby that has seen the key held, as its watch reported.
	s.keys.put("job", heldState(10, record{Kind: kindHeld, Owner: "owner-a", Term: "term-a", TTL: 30 * time.Second}))
	return s, kv, asked
}

// A standby's read that found the key held is confirmed with the stream
// leader before Acquire answers "held". While a replica is down the leader
// may take up to a second to show that it heard from a majority since the
// read; should the watch deliver the holder's release meanwhile, Acquire
// reads the key again and takes it, instead of answering "held" after the
// wait (and the standby acquiring only on its next attempt: a graceful
// handover after a failover took 76 ms so, against 5 to 9 ms).
func TestReadMovedOnWhileConfirmedIsReadAgain(t *testing.T) {
	t.Parallel()
	s, kv, asked := unconfirmingStore(t)
	claim := lease.Claim{LeaseID: "job", OwnerID: "owner-b", Term: "term-b", TTL: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Without a change, the read stays unconfirmed.
	a, err := s.Acquire(ctx, claim)
	require.ErrorIs(t, err, lease.ErrUnavailable, "%+v", a)
	assert.Contains(t, err.Error(), "has not heard from a replica")

	done := make(chan struct{})
	var got lease.Acquisition
	go func() {
		defer close(done)
		got, err = s.Acquire(ctx, claim)
	}()
	n := asked.Load()
	require.Eventually(t, func() bool { return asked.Load() > n }, 5*time.Second, time.Millisecond,
		"the read was never being confirmed")
	// The release lands, and the watch delivers it.
	kv.released.Store(true)
	s.keys.saw("job", freeState(11), false)
	<-done
	require.NoError(t, err)
	require.True(t, got.Acquired, "the standby answered %+v after its watch saw the release", got.Holder)
	assert.Equal(t, lease.Token(12), got.Lease.Token)
	assert.Equal(t, int32(1), kv.writes.Load())
}

// The re-read is for the first attempt only: a watch can deliver revisions
// the stream leader has not applied yet, and a store that re-read for each
// would use up its attempts re-reading and report the key as changing. The
// second read, still showing the key held, is confirmed like any other
// whatever the watch delivers meanwhile, and nothing is written on an
// unconfirmed read.
func TestReadMovedOnIsReadAgainOnce(t *testing.T) {
	t.Parallel()
	s, kv, asked := unconfirmingStore(t)
	claim := lease.Claim{LeaseID: "job", OwnerID: "owner-b", Term: "term-b", TTL: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error)
	go func() {
		_, err := s.Acquire(ctx, claim)
		done <- err
	}()
	require.Eventually(t, func() bool { return asked.Load() > 0 }, 5*time.Second, time.Millisecond,
		"the read was never being confirmed")
	// The watch runs ahead of the leader, which still shows revision 10,
	// once during each confirmation.
	s.keys.saw("job", freeState(11), false)
	require.Eventually(t, func() bool { return kv.reads.Load() == 2 }, 5*time.Second, time.Millisecond,
		"the key was not read again")
	n := asked.Load()
	require.Eventually(t, func() bool { return asked.Load() > n }, 5*time.Second, time.Millisecond,
		"the second read was never being confirmed")
	s.keys.saw("job", freeState(12), false)
	err := <-done
	require.ErrorIs(t, err, lease.ErrUnavailable)
	assert.Contains(t, err.Error(), "cannot be trusted", "the second read was confirmed, and could not be")
	assert.Equal(t, int32(2), kv.reads.Load(), "one read, and one read again")
	assert.Zero(t, kv.writes.Load())
}
