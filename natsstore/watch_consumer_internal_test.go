package natsstore

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
)

// startConsumerWatch watches a key never written, over a real server, and
// returns the watch (its initial state taken) and a connection of its own.
func startConsumerWatch(t *testing.T) (*consumerWatch, *nats.Conn) {
	t.Helper()
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	s, err := NewConn(ctx, nc, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	b, ok := s.kv.(*jsBucket)
	require.True(t, ok, "the store's keyValue is a %T", s.kv)
	kw, err := b.Watch(ctx, "job")
	require.NoError(t, err)
	w := kw.(*consumerWatch)
	t.Cleanup(func() { _ = w.Stop() })
	require.Nil(t, <-w.Updates(), "a key never written: the end of the initial state at once")
	return w, nc
}

// control sends w a control message of the consumer, as the server would.
func control(t *testing.T, nc *nats.Conn, w *consumerWatch, reply string, h nats.Header) {
	t.Helper()
	require.NoError(t, nc.PublishMsg(&nats.Msg{Subject: w.sub.Subject, Reply: reply, Header: h}))
	require.NoError(t, nc.Flush())
}

func awaitMsg(t *testing.T, sub *nats.Subscription, what string) {
	t.Helper()
	_, err := sub.NextMsg(10 * time.Second)
	require.NoError(t, err, what)
}

func awaitEnded(t *testing.T, w *consumerWatch) error {
	t.Helper()
	select {
	case e, ok := <-w.Updates():
		require.False(t, ok, "an entry %v instead of the end", e)
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end")
	}
	_, err := w.ended()
	require.Error(t, err)
	return err
}

// The watch answers the consumer's flow control, asked by a request or, for
// a consumer stalled by it, in a heartbeat's header, and goes on.
func TestConsumerWatchAnswersFlowControl(t *testing.T) {
	t.Parallel()
	w, nc := startConsumerWatch(t)
	answers, err := nc.SubscribeSync("test.fc.>")
	require.NoError(t, err)

	control(t, nc, w, "test.fc.request", nats.Header{statusHdr: {statusControl}, "Description": {"FlowControl Request"}})
	awaitMsg(t, answers, "no answer to a flow control request")
	control(t, nc, w, "", nats.Header{statusHdr: {statusControl}, "Description": {"Idle Heartbeat"},
		lastConsumerHdr: {"0"}, stalledHdr: {"test.fc.stalled"}})
	awaitMsg(t, answers, "no answer to a stalled consumer's heartbeat")

	_, err = w.ended()
	assert.NoError(t, err)
	select {
	case e, ok := <-w.Updates():
		t.Fatalf("the watch delivered %v (open: %v)", e, ok)
	default:
	}
}

// A heartbeat that names a later delivery than the last one the watch had
// means that deliveries were lost: the watch ends, saying so.
func TestConsumerWatchEndsOnASkippedDelivery(t *testing.T) {
	t.Parallel()
	w, nc := startConsumerWatch(t)
	control(t, nc, w, "", nats.Header{statusHdr: {statusControl}, "Description": {"Idle Heartbeat"},
		lastConsumerHdr: {"3"}})
	assert.Contains(t, awaitEnded(t, w).Error(), "skipped deliveries (sequence 3 after 0)")
}

// A status other than a heartbeat or flow control (a consumer deleted, for
// one) ends the watch.
func TestConsumerWatchEndsOnAnotherStatus(t *testing.T) {
	t.Parallel()
	w, nc := startConsumerWatch(t)
	control(t, nc, w, "", nats.Header{statusHdr: {"409"}, "Description": {"Consumer Deleted"}})
	assert.Contains(t, awaitEnded(t, w).Error(), "status 409 Consumer Deleted")
}

// Markers translate as nats.go translates them.
func TestEntryOp(t *testing.T) {
	for _, tc := range []struct {
		h    nats.Header
		want jetstream.KeyValueOp
	}{
		{nil, jetstream.KeyValuePut},
		{nats.Header{hdrOperation: {opDelete}}, jetstream.KeyValueDelete},
		{nats.Header{hdrOperation: {opPurge}}, jetstream.KeyValuePurge},
		{nats.Header{hdrMarkerReason: {reasonMaxAge}}, jetstream.KeyValuePurge},
		{nats.Header{hdrMarkerReason: {"Purge"}}, jetstream.KeyValuePurge},
		{nats.Header{hdrMarkerReason: {"Remove"}}, jetstream.KeyValueDelete},
	} {
		assert.Equal(t, tc.want, entryOp(tc.h), "%v", tc.h)
	}
}
