package natsstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

// herdKV is one key, empty unless last is set. Its first write waits for
// gate; then it lands, or, when first is set, first lands instead (another
// process's write that reached the stream just before) and the write is
// refused. Later writes are refused unless later is set. Its first read,
// when readGate is set, answers what the key held when it was asked, once
// readGate is closed. It counts writes and reads.
type herdKV struct {
	gate     chan struct{}
	readGate chan struct{}
	first    *record
	later    bool

	mu            sync.Mutex
	last          *jetstream.RawStreamMsg
	writes, reads int
}

func (k *herdKV) PublishMsg(_ context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	k.mu.Lock()
	k.writes++
	n := k.writes
	k.mu.Unlock()
	if n == 1 {
		<-k.gate
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if n == 1 && k.first == nil {
		k.last = &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: 7, Header: m.Header, Data: m.Data, Time: time.Now()}
		return &jetstream.PubAck{Stream: "KV_b", Sequence: 7}, nil
	}
	if n == 1 {
		k.last = &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: 7, Data: appendRecord(nil, *k.first), Time: time.Now()}
	}
	if n > 1 && k.later {
		k.last = &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: k.last.Sequence + 1, Header: m.Header,
			Data: m.Data, Time: time.Now()}
		return &jetstream.PubAck{Stream: "KV_b", Sequence: k.last.Sequence}, nil
	}
	return nil, &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant,
		Description: "wrong last sequence"}
}

func (k *herdKV) GetLastMsgForSubject(context.Context, string) (*jetstream.RawStreamMsg, error) {
	k.mu.Lock()
	k.reads++
	n, last := k.reads, k.last
	k.mu.Unlock()
	if n == 1 && k.readGate != nil {
		<-k.readGate
	}
	if last == nil {
		return nil, jetstream.ErrMsgNotFound
	}
	return last, nil
}

func (k *herdKV) Watch(context.Context, string) (jetstream.KeyWatcher, error) {
	return nil, jetstream.ErrKeyValueConfigRequired
}

func (k *herdKV) counts() (writes, reads int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.writes, k.reads
}

// herdStore is a store of one replica over kv, in server expiry mode.
func herdStore(t *testing.T, kv keyValue) *Store {
	s := &Store{
		log:          Config{}.logger(),
		storeConn:    storeConn{kv: kv},
		openedBucket: openedBucket{bucket: "b", subject: "$KV.b.", putPrefix: "$KV.b.", maxTTL: time.Minute},
		keyBook:      keyBook{keys: newKeyCache(time.Now)},
	}
	s.writes = writesOf(s)
	s.bucketChecks = checksOf(s)
	s.mode.Store(uint32(ExpiryServer))
	s.life, s.stop = context.WithCancel(context.Background())
	t.Cleanup(s.stop)
	s.setLink(true)
	return s
}

// herd acquires "job" for n claims of terms term-0 ... term-(n-1): the
// first alone until its write is sent, the others while it waits for the
// write's answer, which kv gives once they all wait. It returns each
// claim's acquisition.
func herd(t *testing.T, s *Store, kv *herdKV, n int) []lease.Acquisition {
	got := make([]lease.Acquisition, n)
	var wg sync.WaitGroup
	acquire := func(i int) {
		wg.Go(func() {
			c := lease.Claim{LeaseID: "job", OwnerID: "owner", Term: "term-" + string(rune('0'+i)), TTL: 10 * time.Second}
			var err error
			got[i], err = s.Acquire(t.Context(), c)
			assert.NoError(t, err, c.Term)
		})
	}
	acquire(0)
	synctest.Wait() // its write waits for the gate
	for i := 1; i < n; i++ {
		acquire(i)
	}
	synctest.Wait() // the others wait for it
	close(kv.gate)
	wg.Wait()
	return got
}

// When a release wakes several standbys of one process, only the first
// writes; the others learn from its write that the lease is now held by it.
func TestStandbysOfOneStoreWriteOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kv := &herdKV{gate: make(chan struct{})}
		s := herdStore(t, kv)
		got := herd(t, s, kv, 5)

		require.True(t, got[0].Acquired)
		assert.Equal(t, lease.Token(7), got[0].Lease.Token)
		for i, a := range got[1:] {
			assert.False(t, a.Acquired, "claim %d", i+1)
			assert.Equal(t, lease.Holder{OwnerID: "owner", Term: "term-0", Token: 7, TTL: 10 * time.Second}, a.Holder,
				"claim %d", i+1)
		}
		writes, reads := kv.counts()
		assert.Equal(t, 1, writes, "writes")
		assert.Equal(t, 0, reads, "reads")
	})
}

// When the first standby of a process finds the lease taken by another
// process, the standbys that waited for it learn the holder from its read.
func TestStandbysOfOneStoreReadOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		other := record{Kind: kindHeld, Owner: "elsewhere", Term: "term-x", TTL: 10 * time.Second}
		kv := &herdKV{gate: make(chan struct{}), first: &other}
		s := herdStore(t, kv)
		got := herd(t, s, kv, 5)

		for i, a := range got {
			assert.False(t, a.Acquired, "claim %d", i)
			assert.Equal(t, other.holder(7), a.Holder, "claim %d", i)
		}
		writes, reads := kv.counts()
		assert.Equal(t, 1, writes, "writes")
		assert.Equal(t, 1, reads, "reads")
	})
}

// A standby that comes to wait for the first after the first sent its read
// does not take that read's answer: the holder it shows may have released
// the lease before the standby called. It reads the key itself.
func TestStandbyJoiningAfterTheReadReadsItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		other := record{Kind: kindHeld, Owner: "elsewhere", Term: "term-x", TTL: 10 * time.Second}
		kv := &herdKV{gate: make(chan struct{}), readGate: make(chan struct{}), first: &other, later: true}
		close(kv.gate)
		s := herdStore(t, kv)
		claim := func(term string) lease.Claim {
			return lease.Claim{LeaseID: "job", OwnerID: "owner", Term: term, TTL: 10 * time.Second}
		}
		var first lease.Acquisition
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			first, err = s.Acquire(t.Context(), claim("term-0"))
		}()
		synctest.Wait() // its write was refused; its read waits, with "elsewhere" holding the key

		// "elsewhere" releases, then a second standby calls.
		kv.mu.Lock()
		kv.last = &jetstream.RawStreamMsg{Subject: "$KV.b.job", Sequence: 8, Header: nats.Header{hdrOperation: []string{opDelete}},
			Data: appendRecord(nil, record{Kind: kindReleased, Owner: "elsewhere", Term: "term-x", Token: 7}), Time: time.Now()}
		kv.mu.Unlock()
		var second lease.Acquisition
		var err2 error
		go func() { second, err2 = s.Acquire(t.Context(), claim("term-1")) }()
		synctest.Wait() // it waits for the first
		close(kv.readGate)
		<-done
		synctest.Wait()

		require.NoError(t, err)
		assert.Equal(t, other.holder(7), first.Holder, "the first standby's read showed the key held")
		require.NoError(t, err2)
		assert.True(t, second.Acquired, "the second standby took %+v, the first's answer, although it called after the release", second.Holder)
		writes, reads := kv.counts()
		assert.Equal(t, 2, writes, "writes")
		assert.Equal(t, 2, reads, "reads")
	})
}

// A standby waiting for another's Acquire waits no longer than its own
// would have taken: its context, or the store's timeout.
func TestStandbyWaitingForAnotherIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kv := &herdKV{gate: make(chan struct{})}
		s := herdStore(t, kv)
		claim := func(term string) lease.Claim {
			return lease.Claim{LeaseID: "job", OwnerID: "owner", Term: term, TTL: 10 * time.Second}
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = s.Acquire(t.Context(), claim("term-0"))
		}()
		synctest.Wait() // its write hangs

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := s.Acquire(ctx, claim("term-1"))
		require.ErrorIs(t, err, lease.ErrUnavailable)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start))

		start = time.Now()
		_, err = s.Acquire(t.Context(), claim("term-2"))
		require.ErrorIs(t, err, lease.ErrUnavailable)
		assert.Equal(t, s.cfg.timeout(), time.Since(start), "without a deadline of its own")
		close(kv.gate)
		<-done
	})
}

// One tenure, one identity: a claim of the term that the first claim's
// write made the holder is never told the lease is held, by itself. It runs
// an Acquire of its own, which takes the lease over from its own term.
func TestStandbyOfTheNewHoldersTermIsNotHeldByItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kv := &herdKV{gate: make(chan struct{}), later: true}
		s := herdStore(t, kv)
		c := lease.Claim{LeaseID: "job", OwnerID: "owner", Term: "term-0", TTL: 10 * time.Second}
		got := make([]lease.Acquisition, 2)
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() {
				var err error
				got[i], err = s.Acquire(t.Context(), c)
				assert.NoError(t, err)
			})
			synctest.Wait() // the first's write waits; then the second waits for it
		}
		close(kv.gate)
		wg.Wait()

		for i, a := range got {
			assert.True(t, a.Acquired, "claim %d: %+v", i, a.Holder)
		}
		assert.ElementsMatch(t, []lease.Token{7, 8}, []lease.Token{got[0].Lease.Token, got[1].Lease.Token})
		writes, _ := kv.counts()
		assert.Equal(t, 2, writes, "writes")
	})
}

// panicKV panics in its first write, once gate is closed: a bug below the
// flight's leader.
type panicKV struct {
	*herdKV
	gate   chan struct{}
	writes atomic.Int32
}

func (p *panicKV) PublishMsg(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	if p.writes.Add(1) == 1 {
		<-p.gate
		panic("natsstore test: a bug in a write")
	}
	return p.herdKV.PublishMsg(ctx, m)
}

// A flight whose leader panics still lands: the claim waiting for it runs
// its own Acquire at once, instead of waiting until its deadline for an
// outcome that never comes (and every later claim of the key with it).
func TestFlightWhoseLeaderPanicsLands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		open := make(chan struct{})
		close(open)
		kv := &panicKV{herdKV: &herdKV{gate: open}, gate: make(chan struct{})}
		s := herdStore(t, kv)
		claim := func(term string) lease.Claim {
			return lease.Claim{LeaseID: "job", OwnerID: "owner", Term: term, TTL: 10 * time.Second}
		}
		panicked := make(chan any, 1)
		go func() {
			defer func() { panicked <- recover() }()
			_, _ = s.Acquire(t.Context(), claim("term-0"))
		}()
		synctest.Wait() // its write waits for the gate

		var got lease.Acquisition
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			got, err = s.Acquire(t.Context(), claim("term-1"))
		}()
		synctest.Wait() // it waits for the flight
		start := time.Now()
		close(kv.gate)
		require.NotNil(t, <-panicked)
		<-done
		require.NoError(t, err)
		assert.True(t, got.Acquired, "its own Acquire took the free key")
		assert.Zero(t, time.Since(start), "at once, not at its deadline")
	})
}
