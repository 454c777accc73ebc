package natsstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
)

// laggingKV stands for the replica a watch's consumer runs on: nats-server
// places a consumer of one replica on any of the stream's replicas, and a
// follower may not have applied writes the leader has acknowledged. While
// lag is set, every watch it makes is one on a follower that has applied
// none of the writes to its keys and applies them all right after: its end
// of initial data comes first, and then what the real watch delivers. It
// can also leave out every entry of one key (a message the replica never
// delivers: the stream was purged of it), fail the next reads of a prefix,
// and end every watch it made.
type laggingKV struct {
	keyValue
	lag       atomic.Bool
	skip      string       // a key whose entries no watch delivers; set before the first watch
	failReads atomic.Int32 // the next reads of a prefix fail
	prefixRev chan uint64  // what each read of a prefix answered

	mu      sync.Mutex
	watches []*laggingWatch
}

type laggingWatch struct {
	jetstream.KeyWatcher // the real watch
	updates              chan jetstream.KeyValueEntry
	done                 chan struct{}
	once                 sync.Once
}

func (k *laggingKV) Watch(ctx context.Context, filter string) (jetstream.KeyWatcher, error) {
	real, err := k.keyValue.Watch(ctx, filter)
	if err != nil {
		return nil, err
	}
	w := &laggingWatch{KeyWatcher: real, updates: make(chan jetstream.KeyValueEntry), done: make(chan struct{})}
	lag := k.lag.Load()
	go func() {
		defer close(w.updates)
		send := func(e jetstream.KeyValueEntry) bool {
			select {
			case w.updates <- e:
				return true
			case <-w.done:
				return false
			}
		}
		if lag && !send(nil) {
			return
		}
		for {
			select {
			case e, ok := <-real.Updates():
				switch {
				case !ok:
					return
				case e == nil && lag, e != nil && e.Key() == k.skip:
				case !send(e):
					return
				}
			case <-w.done:
				return
			}
		}
	}()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.watches = append(k.watches, w)
	return w, nil
}

func (w *laggingWatch) Updates() <-chan jetstream.KeyValueEntry { return w.updates }

func (w *laggingWatch) Stop() error {
	w.end()
	return w.KeyWatcher.Stop()
}

// end ends the watch as a lost consumer's does: its updates close.
func (w *laggingWatch) end() { w.once.Do(func() { close(w.done) }) }

// endAll ends every watch made so far.
func (k *laggingKV) endAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range k.watches {
		w.end()
	}
}

func (k *laggingKV) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	if !strings.HasSuffix(subject, ">") {
		return k.keyValue.GetLastMsgForSubject(ctx, subject)
	}
	if k.failReads.Add(-1) >= 0 {
		return nil, errors.New("a read that failed in a test")
	}
	m, err := k.keyValue.GetLastMsgForSubject(ctx, subject)
	if err == nil {
		select {
		case k.prefixRev <- m.Sequence:
		default:
		}
	}
	return m, err
}

// laggingStore opens a store of a bucket of three replicas on a cluster of
// three servers, its watches made through the returned laggingKV.
func laggingStore(t *testing.T, cfg Config, skip string) (*Store, *laggingKV, jetstream.JetStream) {
	t.Helper()
	c := natstest.StartCluster(t, 3)
	cfg.Replicas = 3
	s, err := Dial(t.Context(), DialOptions{URLs: []string{c.ClientURL()}}, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.True(t, s.writes.replicated())
	k := &laggingKV{keyValue: s.kv, skip: skip, prefixRev: make(chan uint64, 100)}
	s.kv = k
	return s, k, s.js
}

func lagAcquire(t *testing.T, s *Store, id string) lease.Lease {
	t.Helper()
	a, err := s.Acquire(t.Context(), lease.Claim{LeaseID: id, OwnerID: "owner-" + id, Term: "term-" + id,
		TTL: time.Minute})
	require.NoError(t, err)
	require.True(t, a.Acquired)
	return a.Lease
}

// The current state WatchPrefix returns reflects every write acknowledged
// before the call, even when the watch's consumer runs on a replica that had
// applied none of them: an acquisition, a release. It used to be that
// replica's view, empty here (shardtest's CurrentListsHeldLeases over a
// cluster failed so under load: "should have 2 items, has 0", or the
// released lease still held).
func TestWatchPrefixCurrentIsNotBehindAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	s, k, _ := laggingStore(t, Config{}, "")
	a := lagAcquire(t, s, "lag.a")
	b := lagAcquire(t, s, "lag.b")
	require.NoError(t, s.Release(t.Context(), lagAcquire(t, s, "lag.freed")))

	k.lag.Store(true)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	current, _, err := s.WatchPrefix(ctx, "lag.")
	require.NoError(t, err)
	require.Len(t, current, 2, "%v", current)
	for i, l := range []lease.Lease{a, b} {
		assert.Equal(t, l.ID, current[i].LeaseID)
		assert.Equal(t, lease.EventHeld, current[i].Kind)
		assert.Equal(t, l.Revision, current[i].Revision)
		assert.Equal(t, l.Token, current[i].Holder.Token)
	}
}

// initialStates records the initial state each KV watch of a run delivers.
type initialStates struct {
	state map[string]uint64
	done  chan map[string]uint64
}

func (o *initialStates) start() { o.state = map[string]uint64{} }

func (o *initialStates) entry(e jetstream.KeyValueEntry, initial bool) {
	if initial {
		o.state[e.Key()] = e.Revision()
	}
}

func (o *initialStates) initialDone(bool) { o.done <- o.state }

func (o *initialStates) close() {}

// A re-created watch whose consumer runs on a lagging replica ends its
// initial state only once it has caught up with the stream leader, for a
// key and for a prefix: otherwise WatchPrefix would report each lease the
// new watch does not show yet as free, and Watch a held key as free.
func TestRecreatedWatchInitialStateIsNotBehindAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	s, k, _ := laggingStore(t, Config{}, "")
	a := lagAcquire(t, s, "relag.a")
	b := lagAcquire(t, s, "relag.b")
	for _, tc := range []struct {
		filter string
		want   map[string]uint64
	}{
		{"relag.a", map[string]uint64{a.ID: a.Revision}},
		{"relag.>", map[string]uint64{a.ID: a.Revision, b.ID: b.Revision}},
	} {
		k.lag.Store(false)
		out := &initialStates{done: make(chan map[string]uint64, 10)}
		ctx, cancel := context.WithCancel(t.Context())
		require.NoError(t, s.watches.follow(ctx, tc.filter, out))
		assert.Equal(t, tc.want, awaitSignal(t, out.done, "no initial state"), tc.filter)

		k.lag.Store(true)
		k.endAll()
		assert.Equal(t, tc.want, awaitSignal(t, out.done, "no initial state from the re-created watch"), tc.filter)
		cancel()
	}
}

// The last revision under the prefix that the watch must deliver before its
// current state is complete is read again until it does: a later read
// shows a lower one when the messages of the first are gone without a
// marker (here purged from the stream before the replica delivered them),
// and a read that fails is retried.
func TestWatchPrefixCurrentWhenTheLeadersLastRevisionIsGone(t *testing.T) {
	t.Parallel()
	s, k, js := laggingStore(t, Config{WatchCheckInterval: -1, Timeout: 5 * time.Second}, "gone.x")
	a := lagAcquire(t, s, "gone.a")
	x := lagAcquire(t, s, "gone.x")
	k.failReads.Store(2)

	type result struct {
		current []lease.Event
		err     error
	}
	res := make(chan result, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		current, _, err := s.WatchPrefix(ctx, "gone.")
		res <- result{current, err}
	}()
	require.Equal(t, x.Revision, awaitSignal(t, k.prefixRev, "the last revision under the prefix was not read"))
	stream, err := js.Stream(t.Context(), "KV_"+s.Bucket())
	require.NoError(t, err)
	require.NoError(t, stream.Purge(t.Context(), jetstream.WithPurgeSubject("$KV."+s.Bucket()+".gone.x")))

	got := awaitSignal(t, res, "WatchPrefix did not return")
	require.NoError(t, got.err)
	require.Len(t, got.current, 1, "%v", got.current)
	assert.Equal(t, a.ID, got.current[0].LeaseID)
	assert.Equal(t, a.Revision, got.current[0].Revision)
}

// A WatchPrefix that cannot read the last revision under the prefix does
// not return what its watch's replica shows: it is unavailable at its
// timeout, as one whose watch delivers nothing is.
func TestWatchPrefixWithoutTheLeadersLastRevisionIsUnavailable(t *testing.T) {
	t.Parallel()
	s, k, _ := laggingStore(t, Config{Timeout: time.Second}, "")
	lagAcquire(t, s, "unread.a")
	k.lag.Store(true)
	k.failReads.Store(1 << 30)
	_, _, err := s.WatchPrefix(t.Context(), "unread.")
	require.ErrorIs(t, err, lease.ErrUnavailable)
	assert.Contains(t, err.Error(), "the current state did not arrive within 1s")
}
