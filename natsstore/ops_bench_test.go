package natsstore_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// BenchmarkStoreVsRawKV measures Acquire, Renew and Release against the raw
// KV write they are built on, side by side: every iteration times one store
// operation and one raw write (a conditional publish to another key of the
// same bucket, with the expected last sequence and a per-message TTL, on a
// connection of its own, 128 bytes; for release a delete marker, as Release
// writes), in alternating order. ns/op is the
// store operation's mean; raw-ns/op the raw write's; store/raw their ratio
// (goal: at most 1.1); store/raw-p50 the ratio of the medians.
//
// Acquire is timed on the fast path: a key this store released itself, so
// it writes without reading first (one round trip); Release of a lease
// acquired just before; Renew of a held lease. The untimed half of each
// acquire/release pair restores the key.
func BenchmarkStoreVsRawKV(b *testing.B) {
	srv := natstest.Start(b)
	ctx := context.Background()
	store, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}}, natsstore.Config{Bucket: "bench_ops"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	js := natstest.JetStream(b, srv.ClientURL(), nats.ReconnectBufSize(-1))
	raw := &rawWriter{js: js, subject: "$KV.bench_ops.raw", data: bytes.Repeat([]byte("x"), 128)}

	claim := lease.Claim{LeaseID: "bench.ops", OwnerID: lease.NewOwnerID(), Term: lease.NewTerm(), TTL: 30 * time.Second}
	acquire := func() lease.Lease {
		a, err := store.Acquire(ctx, claim)
		if err != nil || !a.Acquired {
			b.Fatalf("acquire: %v (acquired %v)", err, a.Acquired)
		}
		return a.Lease
	}
	release := func(l lease.Lease) {
		if err := store.Release(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
	ops := []struct {
		name string
		op   func(held *lease.Lease) time.Duration // times the store op; keeps held up to date
	}{
		{"acquire", func(held *lease.Lease) time.Duration {
			t0 := time.Now()
			l := acquire()
			d := time.Since(t0)
			release(l)
			return d
		}},
		{"renew", func(held *lease.Lease) time.Duration {
			t0 := time.Now()
			l, err := store.Renew(ctx, *held)
			d := time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			*held = l
			return d
		}},
		{"release", func(held *lease.Lease) time.Duration {
			l := acquire()
			t0 := time.Now()
			release(l)
			return time.Since(t0)
		}},
	}
	for _, o := range ops {
		b.Run(o.name, func(b *testing.B) {
			var held lease.Lease
			if o.name == "renew" {
				held = acquire()
				defer release(held)
			}
			// Release writes a delete marker: its raw counterpart is a
			// conditional delete marker (KV-Operation: DEL) with a TTL.
			raw.del = o.name == "release"
			raw.write(b) // warm up: learn the raw key's sequence
			storeTimes := make([]time.Duration, 0, b.N)
			rawTimes := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				if i%2 == 0 {
					storeTimes = append(storeTimes, o.op(&held))
					rawTimes = append(rawTimes, raw.write(b))
				} else {
					rawTimes = append(rawTimes, raw.write(b))
					storeTimes = append(storeTimes, o.op(&held))
				}
			}
			b.StopTimer()
			storeMean, rawMean := mean(storeTimes), mean(rawTimes)
			b.ReportMetric(storeMean, "ns/op")
			b.ReportMetric(rawMean, "raw-ns/op")
			b.ReportMetric(storeMean/rawMean, "store/raw")
			b.ReportMetric(median(storeTimes)/median(rawTimes), "store/raw-p50")
		})
	}
}

// rawWriter makes the raw KV writes: conditional publishes with a TTL, the
// primitive natsstore's writes are made of.
type rawWriter struct {
	js      jetstream.JetStream
	subject string
	data    []byte
	seq     uint64
	del     bool // write delete markers
}

func (w *rawWriter) write(b *testing.B) time.Duration {
	t0 := time.Now()
	m := &nats.Msg{Subject: w.subject, Data: w.data}
	if w.del {
		m.Header = nats.Header{"KV-Operation": []string{"DEL"}}
	}
	ack, err := w.js.PublishMsg(context.Background(), m,
		jetstream.WithExpectLastSequencePerSubject(w.seq), jetstream.WithMsgTTL(30*time.Second))
	d := time.Since(t0)
	if err != nil {
		b.Fatal(err)
	}
	w.seq = ack.Sequence
	return d
}

func mean(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum) / float64(max(len(ds), 1))
}

func median(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2])
}
