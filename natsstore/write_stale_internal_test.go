package natsstore

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
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
	"github.com/asterforge/aster/natsstore/internal/expiry"
)

// revisionKV answers every read with the key at revision rev.
type revisionKV struct {
	keyValue
	rev atomic.Uint64
}

func (k *revisionKV) GetLastMsgForSubject(_ context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	return &jetstream.RawStreamMsg{Subject: subject, Sequence: k.rev.Load()}, nil
}

// serverConn starts a server and returns a connection to it.
func serverConn(t *testing.T) *nats.Conn {
	t.Helper()
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// answerInfo answers the stream information requests of a store whose
// infoSubject is "test.info" on nc with view's stream view.
func answerInfo(t *testing.T, nc *nats.Conn, view func() streamView) {
	t.Helper()
	sub, err := nc.Subscribe("test.info", func(m *nats.Msg) {
		b, _ := json.Marshal(view())
		_ = m.Respond(b)
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
}

// staleStore is a store of a bucket of the given replicas whose reads kv
// answers, whose clock is *now, and whose stream leader always confirms a
// read: it says it heard from every replica just now. That is what a store
// sees when a deposed leader answers a read and the new leader the
// confirmation.
func staleStore(t *testing.T, replicas int, kv keyValue, now *time.Time, events *[]Event) *Store {
	t.Helper()
	nc := serverConn(t)
	since := time.Now().Add(-time.Hour)
	answerInfo(t, nc, func() streamView {
		return streamView{TS: time.Now(), Cluster: &jetstream.ClusterInfo{Leader: "n2", LeaderSince: &since,
			Replicas: []*jetstream.PeerInfo{{Name: "n1", Current: true}, {Name: "n3", Current: true}}}}
	})
	var mu sync.Mutex
	s := &Store{
		cfg: Config{OnEvent: func(ev Event) {
			mu.Lock()
			defer mu.Unlock()
			*events = append(*events, ev)
		}},
		log:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		storeConn:    storeConn{kv: kv, nc: nc},
		openedBucket: openedBucket{replicas: replicas, bucket: "b", subject: "$KV.b.", infoSubject: "test.info"},
		keyBook:      keyBook{keys: newKeyCache(func() time.Time { return *now })},
	}
	s.writes = writesOf(s)
	s.bucketChecks = checksOf(s)
	return s
}

// A read of a replicated bucket below a revision seen is taken for a stale
// answer (ErrUnavailable, one StaleRead event) until it has lasted
// regressionPersists; a read at or above every revision seen ends the
// spell. Were it taken for lost writes at once, as before, a store on a
// healthy cluster would stop for good on a deposed leader's answer.
func TestStaleReadIsUnavailableUntilItPersists(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var events []Event
	kv := &revisionKV{}
	s := staleStore(t, 3, kv, &now, &events)
	read := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := s.writes.read(ctx, time.Now().Add(10*time.Second), "job")
		return err
	}
	kv.rev.Store(607)
	require.NoError(t, read())
	s.keys.put("job", keyState{Key: expiry.Key{Rev: 607}}) // as judging the read does

	kv.rev.Store(556)
	err := read()
	require.ErrorIs(t, err, lease.ErrUnavailable)
	require.NotErrorIs(t, err, lease.ErrStoreConfig)
	assert.Contains(t, err.Error(), "revision 556, below revision 607")
	now = now.Add(regressionPersists / 2)
	require.ErrorIs(t, read(), lease.ErrUnavailable)
	require.NoError(t, s.Err())
	require.Equal(t, []Event{StaleRead{Bucket: "b", Key: "job", Highest: 607, Got: 556}}, events,
		"one event per spell")

	kv.rev.Store(608) // the real leader answers: the spell ends
	require.NoError(t, read())
	s.keys.put("job", keyState{Key: expiry.Key{Rev: 608}})
	kv.rev.Store(556)
	now = now.Add(regressionPersists/2 + time.Second)
	require.ErrorIs(t, read(), lease.ErrUnavailable, "a new spell, not the first one going on")
	require.NoError(t, s.Err())
	now = now.Add(regressionPersists + time.Second)
	require.ErrorIs(t, read(), lease.ErrUnavailable, "a read after a long quiet starts a new spell")
	require.Len(t, events, 3)

	for range 2 {
		now = now.Add(regressionPersists / 2)
		err = read()
	}
	require.ErrorIs(t, err, lease.ErrStoreConfig, "a regression that lasts is lost writes")
	var be *BucketError
	require.ErrorAs(t, s.Err(), &be)
	assert.Equal(t, ProblemSequenceRegression, be.Problem)
	assert.Equal(t, SequenceRegression{Bucket: "b", Key: "job", Highest: 608, Got: 556}, events[len(events)-1])
}

// A bucket of one replica has no stale leader, nor a follower a watch could
// read ahead of the leader: a read below a revision seen, by a read or a
// watch, is lost writes at once.
func TestRegressedReadOfOneReplicaStops(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var events []Event
	kv := &revisionKV{}
	s := staleStore(t, 1, kv, &now, &events)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv.rev.Store(607)
	_, err := s.writes.read(ctx, time.Now().Add(10*time.Second), "job")
	require.NoError(t, err)
	s.writes.watched(&kvEntry{bucket: "b", key: "job", revision: 607, op: jetstream.KeyValuePut})
	kv.rev.Store(556)
	_, err = s.writes.read(ctx, time.Now().Add(10*time.Second), "job")
	require.ErrorIs(t, err, lease.ErrStoreConfig)
	assert.Equal(t, []Event{SequenceRegression{Bucket: "b", Key: "job", Highest: 607, Got: 556}}, events)
}

// A watch's consumer may run on a follower of the stream, which can apply a
// write before the leader: a read through the leader just after shows the
// key at an older revision. That is not a regression, nor a stale read, and
// the store goes on (a clean-clone test run saw a store stop so, on a
// healthy cluster, when a revision delivered by a watch counted as seen).
func TestWatchAheadOfTheLeaderIsNoRegression(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var events []Event
	kv := &revisionKV{}
	s := staleStore(t, 3, kv, &now, &events)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv.rev.Store(187)
	_, err := s.writes.read(ctx, time.Now().Add(10*time.Second), "job")
	require.NoError(t, err)
	s.keys.put("job", keyState{Key: expiry.Key{Rev: 187}})
	s.writes.watched(&kvEntry{bucket: "b", key: "job", revision: 211, op: jetstream.KeyValuePut})
	st, _ := s.keys.get("job")
	require.Equal(t, uint64(211), st.Rev, "the cache has what the watch delivered")

	m, err := s.writes.read(ctx, time.Now().Add(10*time.Second), "job")
	require.NoError(t, err)
	assert.Equal(t, uint64(187), m.Sequence)
	require.NoError(t, s.Err())
	assert.Empty(t, events)
}
