package natsstore

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
)

// instantKV acknowledges every write at once, without a server, so that a
// benchmark sees the store's own cost per operation.
type instantKV struct{ seq uint64 }

func (k *instantKV) PublishMsg(context.Context, *nats.Msg) (*jetstream.PubAck, error) {
	k.seq++
	return &jetstream.PubAck{Sequence: k.seq}, nil
}

func (k *instantKV) GetLastMsgForSubject(context.Context, string) (*jetstream.RawStreamMsg, error) {
	return nil, jetstream.ErrMsgNotFound
}

func (k *instantKV) Watch(context.Context, string) (jetstream.KeyWatcher, error) {
	return nil, jetstream.ErrKeyValueConfigRequired
}

// BenchmarkOverhead measures what a store operation costs on top of the
// round trip: validation, encoding, the key cache, the request's deadline
// and its link to the connection state. The round trip itself is about
// 40-70 µs on loopback (see BenchmarkStoreVsRawKV).
//
//	go test -run '^$' -bench BenchmarkOverhead -benchmem ./natsstore
func BenchmarkOverhead(b *testing.B) {
	s := &Store{
		log:          Config{}.logger(),
		storeConn:    storeConn{kv: &instantKV{}},
		openedBucket: openedBucket{bucket: "b", subject: "$KV.b.", putPrefix: "$KV.b."},
		keyBook:      keyBook{keys: newKeyCache(time.Now)},
	}
	s.writes = writesOf(s)
	s.bucketChecks = checksOf(s)
	s.mode.Store(uint32(ExpiryServer))
	s.life, s.stop = context.WithCancel(context.Background())
	defer s.stop()
	s.setLink(true)
	ctx := context.Background()
	c := lease.Claim{LeaseID: "bench", OwnerID: lease.NewOwnerID(), Term: lease.NewTerm(), TTL: 10 * time.Second}
	a, err := s.Acquire(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("renew", func(b *testing.B) {
		l := a.Lease
		b.ReportAllocs()
		for b.Loop() {
			if l, err = s.Renew(ctx, l); err != nil {
				b.Fatal(err)
			}
		}
		a.Lease = l
	})
	b.Run("acquire-release", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Release(ctx, a.Lease); err != nil {
				b.Fatal(err)
			}
			if a, err = s.Acquire(ctx, c); err != nil || !a.Acquired {
				b.Fatal(a, err)
			}
		}
	})
}
