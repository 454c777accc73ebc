package natsstore_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/natsstore"
)

// recorder keeps the log records and events of a store, for tests that
// wait for something the store reports.
type recorder struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every record
	logs    []string
	events  []natsstore.Event
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

// config returns cfg with the recorder as its logger and event sink.
func (r *recorder) config(cfg natsstore.Config) natsstore.Config {
	cfg.Logger = slog.New(r)
	cfg.OnEvent = func(ev natsstore.Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, ev)
		r.signal()
	}
	return cfg
}

// signal wakes waiters; r.mu must be held.
func (r *recorder) signal() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, b.String())
	r.signal()
	return nil
}

// waitLog waits until a log record contains text and returns it.
func (r *recorder) waitLog(t *testing.T, text string) string {
	t.Helper()
	return r.wait(t, "a log record with "+text, func() (string, bool) {
		for _, l := range r.logs {
			if strings.Contains(l, text) {
				return l, true
			}
		}
		return "", false
	})
}

// countLogs returns how many log records contain text.
func (r *recorder) countLogs(text string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.logs {
		if strings.Contains(l, text) {
			n++
		}
	}
	return n
}

// waitEvent waits for an event that match accepts.
func waitEvent[E natsstore.Event](t *testing.T, r *recorder) E {
	t.Helper()
	var got E
	r.wait(t, "an event", func() (string, bool) {
		for _, ev := range r.events {
			if e, ok := ev.(E); ok {
				got = e
				return e.String(), true
			}
		}
		return "", false
	})
	return got
}

func (r *recorder) wait(t *testing.T, what string, found func() (string, bool)) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		r.mu.Lock()
		s, ok := found()
		changed := r.changed
		r.mu.Unlock()
		if ok {
			return s
		}
		select {
		case <-changed:
		case <-timeout:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("no %s; logs:\n%s", what, strings.Join(r.logs, "\n"))
		}
	}
}

// handover has two instances, a and b, hand a lease over: a holds it, b
// waits on the watch, a releases it, and b takes it at once, with a larger
// token, woken by the watch.
func handover(t *testing.T, a, b *natsstore.Store) {
	t.Helper()
	id := "handover." + strings.ReplaceAll(t.Name(), "/", ".")
	la := mustAcquire(t, a, claim(id, "owner-a"))
	got, err := b.Acquire(ctxT(t), claim(id, "owner-b"))
	require.NoError(t, err)
	require.False(t, got.Acquired)
	assert.Equal(t, "owner-a", got.Holder.OwnerID)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	events, err := b.Watch(ctx, id)
	require.NoError(t, err)
	require.NoError(t, a.Release(ctxT(t), la))
	released := false
	for ev := range events {
		if ev.Kind == lease.EventFree && ev.Revision > la.Revision {
			released = true
			break
		}
	}
	require.True(t, released, "the watch did not report the release: %v", ctx.Err())
	lb := mustAcquire(t, b, claim(id, "owner-b"))
	assert.Greater(t, lb.Token, la.Token)
	require.NoError(t, b.Release(ctxT(t), lb))
}

// flood writes several MiB of updates to a key of s's bucket through js (a
// connection of the same user) and checks that a watch of s sees the last
// one: without flow control (its $JS.FC permission), the watch stalls
// after about 2 MiB.
func flood(t *testing.T, s *natsstore.Store, js jetstream.JetStream) {
	t.Helper()
	const (
		size  = 64 << 10
		count = 96 // 6 MiB
	)
	key := "flood." + strings.ReplaceAll(t.Name(), "/", ".")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	events, err := s.Watch(ctx, key)
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, s.Bucket())
	require.NoError(t, err)
	var last uint64
	for range count {
		last, err = kv.Put(ctx, key, make([]byte, size))
		require.NoError(t, err)
	}
	for ev := range events {
		if ev.Revision >= last {
			return
		}
	}
	t.Fatalf("the watch did not see the last of %d updates of %d KiB (revision %d): %v", count, size>>10, last, ctx.Err())
}

// rawJetStream connects to url with opts and returns a JetStream context
// for the store's domain or API prefix.
func rawJetStream(t *testing.T, url string, cfg natsstore.Config, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, _ := conn(t, url, opts...)
	var (
		js  jetstream.JetStream
		err error
	)
	switch {
	case cfg.Domain != "":
		js, err = jetstream.NewWithDomain(nc, cfg.Domain)
	case cfg.APIPrefix != "":
		js, err = jetstream.NewWithAPIPrefix(nc, cfg.APIPrefix)
	default:
		js, err = jetstream.New(nc)
	}
	require.NoError(t, err)
	return js
}

// leastPrivilege returns the publish and subscribe permissions of a
// service account for bucket in topology top, without the bucket's
// creation, as examples/permissions prints them.
func leastPrivilege(bucket string, top natstest.Topology) (publish, subscribe []string) {
	pub, sub := natstest.Permissions(bucket, top)
	for _, p := range pub {
		if !p.Create {
			publish = append(publish, p.Subject)
		}
	}
	return publish, sub
}

// deployment runs the conformance suite (short: one-second TTLs, few
// rounds) and a handover with stores that newStore opens, and checks that a
// watch keeps up with several MiB of updates, through js.
func deployment(t *testing.T, newStore func(t *testing.T) *natsstore.Store, js jetstream.JetStream) {
	t.Run("Conformance", func(t *testing.T) {
		leasetest.Run(t, func(t *testing.T) lease.Store { return newStore(t) }, leasetest.WithRounds(3))
	})
	t.Run("Handover", func(t *testing.T) { handover(t, newStore(t), newStore(t)) })
	t.Run("WatchFlowControl", func(t *testing.T) { flood(t, newStore(t), js) })
	t.Run("DirectGet", func(t *testing.T) { directGet(t, newStore(t)) })
}

// directGet checks that the store's direct get (which stands in for reads
// while JetStream has no meta leader) reaches the bucket in the deployment,
// with the permissions it was given, and shows a released key free.
func directGet(t *testing.T, s *natsstore.Store) {
	t.Helper()
	id := "direct." + strings.ReplaceAll(t.Name(), "/", ".")
	l := mustAcquire(t, s, claim(id, "owner-a"))
	require.NoError(t, s.Release(ctxT(t), l))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	rev, err := natsstore.DirectFree(ctx, s, id)
	require.NoError(t, err)
	require.Greater(t, rev, l.Revision, "a direct get did not show the released key free")
}
